"""``aic-compile deploy``: the deployment files of one chosen row (a row of ``sweep --json``
output or of a ``best_config_topn.csv``) without running a sweep (spec 60, issue 42)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, chosen_systems_path


@click.command("deploy", context_settings=CONTEXT_SETTINGS)
@click.option("--row", "row_file", default=None,
              help="JSON file: a sweep row, a list of rows, or a whole `sweep --json` result.")
@click.option("--csv", "csv_file", default=None, help="A best_config_topn.csv.")
@click.option("--rank", type=click.IntRange(min=1), default=1, show_default=True,
              help="Which row (1 = best) of a CSV, a list or a result.")
@click.option("--mode", type=click.Choice(["agg", "disagg"]), default=None,
              help="Mode of a whole `sweep --json` result (default: its chosen mode).")
@click.option("--save-dir", required=True, help="The pick folder to create (must not exist).")
@click.option("--gpus", "total_gpus", type=click.IntRange(min=1), default=None,
              help="GPU budget the workers fill (default: the experiment record's, else the "
                   "row's num_total_gpus).")
@click.option("--nextn", type=click.IntRange(min=0), default=None, help="MTP draft length.")
@click.option("--nextn-accepted", type=float, default=None)
@click.option("--ttft", type=float, default=None, help="TTFT target of the replay, ms.")
@click.option("--tpot", type=float, default=None, help="TPOT target of the replay, ms.")
@click.option("--deployment-target", default="dynamo", show_default=True,
              help="dynamo, llm-d-helm or llm-d-kustomize.")
@click.option("--dynamo-version", default=None, help="Dynamo release (default 1.3.0).")
@click.option("--namespace", default=None)
@click.option("--model-cache", default=None, help="NAME[:MOUNT[:SUBPATH]].")
@click.option("--transport", default="nvlink", show_default=True, help="nvlink, ib or efa.")
@click.option("--image-pull-secret", default=None)
@click.option("--set", "generator_set", multiple=True, help="Generator override KEY=VALUE.")
@click.option("--no-replay", is_flag=True, help="Skip the replay (replay.json).")
@click.option("--systems-path", "local_systems_path", default=None)
@click.pass_context
def deploy_cmd(ctx, row_file, csv_file, rank, mode, save_dir, total_gpus, nextn, nextn_accepted,
               ttft, tpot, deployment_target, dynamo_version, namespace, model_cache, transport,
               image_pull_secret, generator_set, no_replay, local_systems_path):
    """Deployment files of one chosen row (Dynamo manifest, launch and bench scripts, ...)."""
    from ..deploy import DeployError, GeneratorOptions
    from ..deploy.single import experiment_record, read_csv_row, read_json_row, render_row
    from ..serving.plan import PlanValueError

    if (row_file is None) == (csv_file is None):
        raise click.UsageError("give exactly one of --row FILE and --csv FILE")
    try:
        options = GeneratorOptions.create(
            target=deployment_target, dynamo_version=dynamo_version, namespace=namespace,
            model_cache=model_cache, transport=transport, image_pull_secret=image_pull_secret,
            sets=list(generator_set))
        record: dict = {}
        if csv_file is not None:
            row = read_csv_row(csv_file, rank)
            record = experiment_record(csv_file)
            mode = mode or record.get("serving_mode")
        else:
            row, mode = read_json_row(row_file, rank, mode)
        path = render_row(
            row, save_dir=save_dir, mode=mode, total_gpus=total_gpus or record.get("total_gpus"),
            nextn=nextn if nextn is not None else (record.get("nextn") or 0),
            nextn_accepted=(nextn_accepted if nextn_accepted is not None
                            else record.get("nextn_accepted")),
            ttft_target=ttft if ttft is not None else record.get("ttft"),
            tpot_target=tpot if tpot is not None else record.get("tpot"),
            options=options, replay=not no_replay,
            systems_path=chosen_systems_path(ctx, local_systems_path))
    except (DeployError, PlanValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"saved: {path}")
