"""Readers turn users' files (config.json, load-test results, logs, manifests,
metric scrapes) into validated planner inputs, with errors that name the file
and the field."""
