"""Autoscaling manifests: writing them, linting them, checking them against their schemas."""
