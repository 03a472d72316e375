"""The runtime layer: a bound graph run forward.

The executor (:mod:`.executor`), the subgraph operator that runs an
accelerator subgraph inside it (:mod:`.subgraph`), the direct path that runs
a whole-graph subgraph as one engine operation (:mod:`.direct_run`) and the
compiled-model cache (:mod:`.model_cache`). It also answers MXNet's
``mx.runtime`` (:mod:`.features`: the build features, all disabled).
"""

# MXNet's ``mx.runtime`` names: the build features, every one disabled here.
from .features import Feature, Features, feature_list

__all__ = ["Feature", "Features", "feature_list"]
