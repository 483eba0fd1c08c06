"""Cache-aware routing across instances (DESIGN.md §1 ``plans/route``; the seed's §6).

Face: :func:`route` (every policy × N over a trace: hit rates, balance, prefill savings, and with a
deployment TTFT, GPUs and KV migration), :class:`RouterSettings`, :data:`POLICIES`.
Modules: ``policies`` (who serves each request), ``replay`` (exact per-instance LRU prefix hits),
``plan`` (the rows), ``service`` (the deployment: KV pool, service times, fleet model), ``migration``
(route to the holder vs copy its KV vs recompute).
"""

from kvplan.plans.route.plan import RouterSettings, check_policies, route
from kvplan.plans.route.policies import POLICIES

__all__ = ["POLICIES", "RouterSettings", "check_policies", "route"]
