//! The mocker's engine arguments for one aic deployment: [`mocker_config`] copies the scheduler
//! model, limits and KV capacity that [`aic_replay::RoleBuilder`] derives from a compiled spec
//! (backend defaults, KV capacity from aic's memory model) into a `dynamo-mocker`
//! [`MockerConfig`], and installs an aic-backed timing callback.
//!
//! It exists so that the example's two replays (the mocker's and [`aic_replay::Replay`]) run the
//! same scheduler configuration: any difference between them is then the mocker's own, not a
//! configuration mismatch.

use std::sync::Arc;

use aic_replay::RoleSetup;
use dynamo_mocker::common::perf_model::{AisCallback, PerfModel};
use dynamo_mocker::config::MockerConfig;

/// A [`MockerConfig`] running `setup`'s scheduler configuration with `callback`'s latencies.
///
/// The KV capacity is marked explicit (`num_gpu_blocks_is_explicit`): it is aic's estimate,
/// and the mocker must not re-derive it.
pub fn mocker_config(
    setup: &RoleSetup,
    callback: Arc<dyn AisCallback>,
) -> anyhow::Result<MockerConfig> {
    let mut args = MockerConfig::default();
    args.engine.engine = setup.rank.clone();
    args.engine.dp_size = setup.dp_size;
    args.engine.tensor_parallel_size = usize::try_from(setup.gpus_per_rank)?;
    args.engine.num_gpu_blocks_is_explicit = true;
    args.perf_model = Arc::new(PerfModel::from_ais_callback(callback));
    args.normalized()
}
