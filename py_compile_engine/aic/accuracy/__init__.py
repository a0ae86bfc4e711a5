"""Accuracy against measured deployments and the calibrated estimate's constants.

``scoring`` turns rows of a silicon sample into serving requests, predicts them and scores the
predictions (MdAPE, MAPE, bias); ``calibration_fit`` fits the calibrated estimate's constants
on such a sample.
"""
