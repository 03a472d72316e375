"""Sparse inputs at the accelerator boundary (ABI 1.2, mxnet_acc.h section 12).

A graph whose variables include CSR or row-sparse arrays is offered to a
plugin twice when the plugin takes sparse tensors (``supportsSparse()``):
once annotated with the storage types ("__out_stypes__" on the variables,
"__in_stypes__" on their readers), once dense. Each operator that reads a
sparse entry then gets one verdict:

``sparse``     accepted with the storage annotations: it runs in a subgraph
               whose input is that sparse array, passed as a SparseTensor or
               RowSparseTensor (MXTensor.isSparse 1 or 2)
``densified``  declined with them (or the plugin takes no sparse tensors:
               built for an ABI before 1.2, or without supportsSparse())
               but accepted dense: the host densifies the input at the
               subgraph's boundary
``cpu``        declined either way: it stays on the CPU, which runs it on
               the sparse array

A plugin that does not take sparse tensors is only ever offered the dense
graph, so it never sees a sparse tensor or a storage annotation. The
verdicts travel with the :class:`~acc_host.partition.segment.Partition`
(``storage``) to the subgraph extraction (an input stays sparse only when
every reader in its subgraph was accepted sparse) and to the explanation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..abi.sparse import STYPE_CODES, STYPE_NAMES
from ..graph import Graph

__all__ = ["StorageVerdict", "variable_stypes", "entry_stypes", "sparse_readers", "judge_storage",
           "sparse_entries_kept"]

# MXNet's "__storage_type__" codes (graph/storage.py): 1 row_sparse, 2 csr.
_MXNET_CODES = {"1": STYPE_CODES["row_sparse"], "2": STYPE_CODES["csr"]}


@dataclass(frozen=True)
class StorageVerdict:
    """How one operator reading a sparse entry is run (see the module)."""

    node: int
    sparse_inputs: tuple[tuple[int, str, str], ...]  # (position, variable name, stype name)
    verdict: str  # "sparse", "densified" or "cpu"
    reason: str   # why, for the explanation

    def describe(self) -> str:
        inputs = ", ".join(f"input {position} ({name}) is {stype}"
                           for position, name, stype in self.sparse_inputs)
        if self.verdict == "sparse":
            return f"{inputs}: kept sparse across the ABI (isSparse)"
        if self.verdict == "densified":
            return f"{inputs}: densified at the subgraph boundary ({self.reason})"
        return f"{inputs}: kept on the CPU, which runs it sparse ({self.reason})"


def variable_stypes(graph: Graph, arrays: Mapping[str, Any]) -> dict[str, int]:
    """The sparse variables of graph (name -> MXTensor.isSparse value): the
    storage type of the array bound to each (``stype`` "csr" or
    "row_sparse"), else MXNet's "__storage_type__" attribute."""
    found: dict[str, int] = {}
    for node in graph.nodes:
        if not node.is_variable:
            continue
        if node.name in arrays:
            stype = getattr(arrays[node.name], "stype", "default")
            code = STYPE_CODES.get(stype) if stype in ("csr", "row_sparse") else None
        else:
            code = _MXNET_CODES.get(str(node.attrs.get("__storage_type__", "")))
        if code is not None:
            found[node.name] = code
    return found


def entry_stypes(graph: Graph, stypes: Mapping[str, int]) -> list[int]:
    """The storage value of every entry: the variables' from stypes, every
    operator output dense (ABI 1.2 passes sparse inputs only)."""
    values = [0] * graph.num_entries
    for k, node in enumerate(graph.nodes):
        if node.is_variable and node.name in stypes:
            values[graph.entry_start[k]] = stypes[node.name]
    return values


def sparse_readers(graph: Graph, stypes: Mapping[str, int]
                   ) -> dict[int, tuple[tuple[int, str, str], ...]]:
    """Operator node -> its sparse inputs (position, variable name, stype
    name), for every operator that reads a sparse variable."""
    readers: dict[int, tuple[tuple[int, str, str], ...]] = {}
    for k, node in enumerate(graph.nodes):
        if node.is_variable:
            continue
        found = tuple((position, producer.name, STYPE_NAMES[stypes[producer.name]])
                      for position, (producer, _, _) in enumerate(node.inputs)
                      if producer.is_variable and producer.name in stypes)
        if found:
            readers[k] = found
    return readers


def judge_storage(readers: Mapping[int, tuple[tuple[int, str, str], ...]],
                  sparse_ids: Collection[int] | None, dense_ids: Collection[int],
                  sparse_reasons: Mapping[int, str], plugin: str) -> dict[int, StorageVerdict]:
    """The verdict of every sparse reader. sparse_ids: supportedOps' answer
    for the graph annotated with storage types (None: the plugin takes no
    sparse tensors and was not asked); dense_ids: its answer for the dense
    graph; sparse_reasons: its reasons for the nodes it declined sparse."""
    verdicts = {}
    sparse_set = set(sparse_ids) if sparse_ids is not None else None
    dense_set = set(dense_ids)
    for k, inputs in readers.items():
        if sparse_set is not None and k in sparse_set:
            verdicts[k] = StorageVerdict(k, inputs, "sparse", "accepted sparse")
            continue
        if sparse_set is None:
            why = f"{plugin} does not take sparse tensors (ABI 1.2 supportsSparse())"
        else:
            why = f"{plugin} declined it sparse"
            if sparse_reasons.get(k):
                why += f": {sparse_reasons[k]}"
        verdicts[k] = StorageVerdict(k, inputs, "densified" if k in dense_set else "cpu", why)
    return verdicts


def sparse_entries_kept(graph: Graph, members: Collection[int], stypes: Mapping[str, int],
                        verdicts: Mapping[int, StorageVerdict]) -> dict[int, int]:
    """The entries a subgraph of members receives sparse (entry -> storage
    value): sparse variables every reader of which in members was accepted
    sparse. The others are densified at its boundary."""
    kept: dict[int, int] = {}
    refused: set[int] = set()
    for k in members:
        node = graph.nodes[k]
        for producer, output, _ in node.inputs:
            if not (producer.is_variable and producer.name in stypes):
                continue
            entry = graph.entry(producer, output)
            verdict = verdicts.get(k)
            if verdict is not None and verdict.verdict == "sparse":
                kept[entry] = stypes[producer.name]
            else:
                refused.add(entry)
    return {entry: value for entry, value in kept.items() if entry not in refused}
