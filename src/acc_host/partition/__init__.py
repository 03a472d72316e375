"""The partition layer: which operators of a graph run on an accelerator.

:mod:`.segment` splits a graph into accelerator subgraphs and CPU operators,
:mod:`.offload` decides whether offloading a candidate pays, and
:mod:`.explain` says why every operator runs where it does.
"""
