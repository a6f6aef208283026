"""The ``node_overbuy`` module counts the nodes cluster-autoscaler buys too many for one GPU pod.

A new GPU node registers, and turns Ready, before its GPUs are allocatable:
the driver and the device plugin (the NVIDIA GPU Operator's daemon sets, for
instance) take ``node_init_s`` more. cluster-autoscaler knows that such a node
will gain GPUs only when the node carries its cloud provider's GPU label: it
then counts the node as not ready yet, a node still on its way, and buys
nothing more (``cluster-autoscaler/processors/customresources/gpu_processor.go``,
``FilterOutNodesWithUnreadyResources``; the AWS provider's README, "Special
note on GPU instances").
Without the label it sees a Ready node on which the pending pod does not fit,
and at its next scan asks for another node. That one counts as on its way
until it registers; then the same happens again, until the first node's GPUs
are allocatable and the pod binds. kubernetes/autoscaler issue 6707 reports
two nodes for one pod, NVIDIA/gpu-operator issue 708 about four scale-ups.

The planner's fleet simulator does not model this: its node autoscaler counts
a node as on its way until its GPUs are allocatable, which is what
cluster-autoscaler does when the label is there. :func:`node_overbuy` gives
what the over-buying would add, for one pending pod, under three
approximations: a node registers and turns Ready at the same moment, the
extra nodes take exactly ``provision_s`` to register, and each is removed as
soon as cluster-autoscaler's scale-down rules allow: at a scan once it has
been unneeded (registered and empty) for ``scale_down_unneeded_s`` and at
least ``scale_down_delay_after_add_s`` after the last scale-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.dynamics.cold_start import ClusterAutoscalerSettings, ColdStartPhases, cluster_autoscaler_scale_up_s
from planner.errors import PlannerInputError, require_non_negative

__all__ = ["NodeOverbuy", "node_overbuy"]


@dataclass(frozen=True)
class NodeOverbuy:
    """The nodes cluster-autoscaler asks for to place one pod when the new node's GPUs carry no label.

    Attributes
    ----------
    requested_s : tuple of float
        When each node was requested: the one the pod lands on first, then the extra ones. [s]
    removed_s : tuple of float
        When each extra node is removed, in the same order as ``requested_s[1:]``. [s]
    """

    requested_s: tuple[float, ...]
    removed_s: tuple[float, ...]

    @property
    def extra_nodes(self) -> int:
        """Nodes bought beyond the one the pod needs."""
        return len(self.requested_s) - 1

    @property
    def extra_node_hours(self) -> float:
        """Node time billed for the extra nodes, from each request to its removal. [node-h]"""
        pairs = zip(self.requested_s[1:], self.removed_s, strict=True)
        return math.fsum(removed - requested for requested, removed in pairs) / 3600


def node_overbuy(
    phases: ColdStartPhases,
    settings: ClusterAutoscalerSettings,
    *,
    pending_since_s: float = 0.0,
    first_scan_s: float = 0.0,
) -> NodeOverbuy:
    """The nodes bought for one pod pending since ``pending_since_s`` when new nodes' GPUs are not labelled.

    The first node is requested at :func:`planner.dynamics.cold_start.cluster_autoscaler_scale_up_s`;
    each later one at the first scan after the node before it registered
    (``provision_s`` after its request), for as long as that comes before the
    first node's GPUs are allocatable (``provision_s + node_init_s`` after its
    request).

    Parameters
    ----------
    phases : ColdStartPhases
        Only ``provision_s`` and ``node_init_s`` are used.
    settings : ClusterAutoscalerSettings
    pending_since_s : float, optional
        When the pod became pending. [s]
    first_scan_s : float, optional
        The time of one of cluster-autoscaler's scans. [s]

    Returns
    -------
    NodeOverbuy

    Raises
    ------
    PlannerInputError
        When both ``provision_s`` and ``scan_interval_s`` are 0 and ``node_init_s``
        is not: every instant would buy another node.

    Examples
    --------
    kaito issue 2325's node (284 s to register, 126 s more to allocatable GPUs), default settings:
    one extra node, requested at 320 s and removed at 1,210 s.

    >>> overbuy = node_overbuy(ColdStartPhases(provision_s=284, node_init_s=126), ClusterAutoscalerSettings())
    >>> overbuy.requested_s, overbuy.removed_s
    ((30.0, 320.0), (1210.0,))

    A node that registers in 60 s and installs its driver in 240 s: four extra nodes.

    >>> node_overbuy(ColdStartPhases(provision_s=60, node_init_s=240), ClusterAutoscalerSettings()).extra_nodes
    4
    """
    require_non_negative("pending_since_s", pending_since_s)
    scan_s = settings.scan_interval_s
    if phases.provision_s == 0 and scan_s == 0 and phases.node_init_s > 0:
        raise PlannerInputError(
            "provision_s and scan_interval_s are both 0: cluster-autoscaler would buy a node every instant "
            "until node_init_s has passed",
            parameter="provision_s",
            expected="a number > 0 when scan_interval_s is 0",
            value=phases.provision_s,
        )

    def next_scan_s(at_s: float, after_s: float) -> float:
        # The first scan at or after at_s and strictly after after_s.
        if scan_s == 0:
            return max(at_s, after_s)
        scans = math.ceil(round((at_s - first_scan_s) / scan_s, 9))
        time_s = first_scan_s + scans * scan_s
        while time_s <= after_s:
            time_s += scan_s
        return float(time_s)

    first_s = cluster_autoscaler_scale_up_s(pending_since_s, settings, first_scan_s=first_scan_s)
    allocatable_s = first_s + phases.provision_s + phases.node_init_s
    requested = [first_s]
    while True:
        buy_s = next_scan_s(requested[-1] + phases.provision_s, requested[-1])
        if buy_s >= allocatable_s:
            break
        requested.append(buy_s)
    removed = tuple(
        next_scan_s(
            max(
                requested_s + phases.provision_s + settings.scale_down_unneeded_s,
                requested[-1] + settings.scale_down_delay_after_add_s,
            ),
            requested_s,
        )
        for requested_s in requested[1:]
    )
    return NodeOverbuy(tuple(requested), removed)
