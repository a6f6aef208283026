"""The Kubernetes HPA and KEDA, ported from their controllers' source: specs, defaults, the
replica calculator, behavior, the horizontal controller, KEDA, its formula, and explanations.
"""
