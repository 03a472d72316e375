"""Control-flow nodes: the operator a ``_cond``, ``_foreach``,
``_while_loop`` or ``_loop`` node gets once its bodies are graphs.

Each body is a graph of its own (:class:`acc_host.graph.Graph` over the
node's :class:`~acc_host.graph.symbol_json.Subgraph`); its inputs are its
variables in node order (MXNet's ``list_inputs``), and the node's ``*_locs``
attributes say where each one comes from: a node input, the current slice of
a data input (foreach), a loop-carried value, the iteration number or the
current condition (ONNX Loop). :class:`ControlFlowOp` infers shapes and
dtypes through the bodies and runs the loop itself; it runs a body through a
*body runner*: by default every body operator on the CPU path (numpy), and,
inside an executor on an accelerator, the runtime's body executors (see
acc_host.runtime.control_flow), each body compiled once and reused on
every iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import numpy as np

from ..errors import GraphError, OperatorError, ShapeError
from ..ops.control_flow import BODIES
from ..ops.params import Attrs
from ..ops.registry import OpDef, ShapeUnknownError
from .symbol_json import Node

__all__ = ["ControlFlowOp", "BodyRunner", "bind_bodies", "body_inputs", "evaluate",
           "dynamic_entries", "MAX_LOOP_ITERATIONS"]

#: A body run: (body index, its inputs in body-input order) -> its outputs.
BodyRunner = Callable[[int, list[np.ndarray]], list[np.ndarray]]

#: The most iterations a loop without a finite trip count may run before the
#: host stops it with an error (an ONNX Loop with neither a trip count nor a
#: condition that ever turns false would run forever).
MAX_LOOP_ITERATIONS = 1 << 24

T = TypeVar("T")

# A body input's source: ("in", j) node input j; ("slice", j) row t of node
# input j; ("var", s, j) loop-carried value s, first node input j; ("iter",)
# the iteration number; ("cond",) the loop's current condition.
Source = tuple[Any, ...]


def body_inputs(body: Any) -> list[int]:
    """The node indices of a body graph's inputs (its variables, in order)."""
    return [k for k, node in enumerate(body.nodes) if node.is_variable]


@dataclass(frozen=True)
class ControlFlowOp(OpDef):
    """A control-flow node's operator: the registry's entry with the node's
    bodies (graphs), where each body input comes from (``sources``), and
    the loop that runs them."""

    bodies: tuple[Any, ...] = ()
    sources: tuple[tuple[Source, ...], ...] = ()
    node_name: str = ""
    node_attrs: Attrs | None = None

    # ---- running -------------------------------------------------------------------

    def execute(self, attrs: Attrs, inputs: Sequence[np.ndarray],
                run_body: BodyRunner | None = None) -> list[np.ndarray]:
        """The node's outputs from its inputs, each body run by run_body
        (default: on the CPU path)."""
        run = run_body or self.evaluate_body
        if self.name == "_cond":
            return self._run_cond(attrs, inputs, run)
        if self.name == "_foreach":
            return self._run_foreach(attrs, inputs, run)
        if self.name == "_while_loop":
            return self._run_while(attrs, inputs, run)
        return self._run_loop(attrs, inputs, run)

    def evaluate_body(self, index: int, values: list[np.ndarray]) -> list[np.ndarray]:
        return evaluate(self.bodies[index], values)

    def _gather(self, index: int, inputs: Sequence[np.ndarray], carried: Sequence[Any] = (),
                t: int = 0, cond: Any = None) -> list[np.ndarray]:
        values = []
        for source in self.sources[index]:
            kind = source[0]
            if kind == "in":
                values.append(inputs[source[1]])
            elif kind == "slice":
                values.append(inputs[source[1]][t])
            elif kind == "var":
                values.append(carried[source[1]])
            elif kind == "iter":
                values.append(np.asarray(t, dtype=np.int64))
            else:
                values.append(np.asarray(cond, dtype=np.bool_))
        return values

    def _truth(self, value: Any, what: str) -> bool:
        array = np.asarray(value)
        if array.size != 1:
            raise ShapeError(f"{self._where()}: {what} must hold one value, got shape "
                             f"{array.shape}")
        return bool(array.reshape(-1)[0])

    def _where(self) -> str:
        return f"node {self.node_name!r} ({self.name})"

    def _check_carried(self, old: Sequence[np.ndarray], new: Sequence[np.ndarray],
                       step: int) -> None:
        for position, (before, after) in enumerate(zip(old, new)):
            if np.shape(before) != np.shape(after):
                raise ShapeError(f"{self._where()}: loop-carried value {position} changes shape "
                                 f"from {np.shape(before)} to {np.shape(after)} at iteration "
                                 f"{step}")

    def _run_cond(self, attrs: Attrs, inputs: Sequence[np.ndarray],
                  run: BodyRunner) -> list[np.ndarray]:
        (pred,) = run(0, self._gather(0, inputs))[:1]
        branch = 1 if self._truth(pred, "the condition") else 2
        return [np.asarray(value) for value in run(branch, self._gather(branch, inputs))]

    def _run_foreach(self, attrs: Attrs, inputs: Sequence[np.ndarray],
                     run: BodyRunner) -> list[np.ndarray]:
        data = [inputs[source[1]] for source in self.sources[0] if source[0] == "slice"]
        lengths = {np.shape(array)[0] if np.ndim(array) else None for array in data}
        if len(lengths) != 1 or None in lengths:
            raise ShapeError(f"{self._where()}: the data inputs must share their first "
                             f"extent, got shapes {[np.shape(array) for array in data]}")
        length = int(lengths.pop() or 0)
        carried = [inputs[k] for k in self._state_inputs(attrs)]
        produced: list[list[np.ndarray]] = [[] for _ in range(attrs.num_out_data)]
        for t in range(length):
            results = run(0, self._gather(0, inputs, carried, t))
            for k in range(attrs.num_out_data):
                produced[k].append(np.asarray(results[k]))
            new = [np.asarray(value) for value in results[attrs.num_out_data:]]
            self._check_carried(carried, new, t)
            carried = new
        outputs = [self._stack(rows, k, inputs, length) for k, rows in enumerate(produced)]
        return outputs + [np.array(value, copy=True) for value in carried]

    def _state_inputs(self, attrs: Attrs) -> list[int]:
        count = len(attrs.in_data_locs)
        return list(range(count, count + len(attrs.in_state_locs)))

    def _stack(self, rows: list[np.ndarray], k: int, inputs: Sequence[np.ndarray],
               length: int) -> np.ndarray:
        if rows:
            return np.stack(rows)
        shape, dtype = self._output_spec(k, inputs)
        return np.zeros((length, *shape[1:]), dtype)

    def _output_spec(self, k: int, inputs: Sequence[np.ndarray]) -> tuple[tuple, np.dtype]:
        """Output k's shape and dtype from the inputs' (for loops that ran
        no iteration)."""
        _, shapes = self.infer_through([np.shape(value) for value in inputs], "shape")
        _, dtypes = self.infer_through([np.asarray(value).dtype for value in inputs], "dtype")
        return tuple(shapes[k]), np.dtype(dtypes[k])

    def _run_while(self, attrs: Attrs, inputs: Sequence[np.ndarray],
                   run: BodyRunner) -> list[np.ndarray]:
        initial = self._var_inputs()
        carried = [inputs[initial[s]] for s in range(len(initial))]
        produced: list[list[np.ndarray]] = [[] for _ in range(attrs.num_out_data)]
        step = 0
        while step < attrs.max_iterations:
            (pred,) = run(0, self._gather(0, inputs, carried))[:1]
            if not self._truth(pred, "the cond body's output"):
                break
            results = run(1, self._gather(1, inputs, carried))
            for k in range(attrs.num_out_data):
                produced[k].append(np.asarray(results[k]))
            new = [np.asarray(value) for value in results[attrs.num_out_data:]]
            self._check_carried(carried, new, step)
            carried = new
            step += 1
        outputs = []
        for k, rows in enumerate(produced):
            # MXNet's outputs have max_iterations rows; those past the last
            # iteration are zeros here (MXNet leaves them unset).
            shape, dtype = ((rows[0].shape, rows[0].dtype) if rows
                            else self._output_spec(k, inputs))
            shape = shape if rows else shape[1:]
            padded = np.zeros((attrs.max_iterations, *shape), dtype)
            if rows:
                padded[:len(rows)] = np.stack(rows)
            outputs.append(padded)
        return outputs + [np.array(value, copy=True) for value in carried]

    def _var_inputs(self) -> dict[int, int]:
        """Loop-carried value -> the node input holding its first value."""
        return {source[1]: source[2] for sources in self.sources for source in sources
                if source[0] == "var"}

    def _run_loop(self, attrs: Attrs, inputs: Sequence[np.ndarray],
                  run: BodyRunner) -> list[np.ndarray]:
        trip = int(np.asarray(inputs[0]).reshape(-1)[0]) if np.size(inputs[0]) == 1 else None
        if trip is None:
            raise ShapeError(f"{self._where()}: the trip count must hold one value, got shape "
                             f"{np.shape(inputs[0])}")
        cond = self._truth(inputs[1], "the condition")
        count = attrs.num_carried
        carried = [inputs[2 + s] for s in range(count)]
        scans: list[list[np.ndarray]] = [[] for _ in range(attrs.num_outputs - count)]
        step = 0
        while step < trip and cond:
            if step >= MAX_LOOP_ITERATIONS:
                raise OperatorError(f"{self._where()}: stopped after {step} iterations "
                                    f"(MAX_LOOP_ITERATIONS); its condition never turned false")
            results = run(0, self._gather(0, inputs, carried, step, cond))
            cond = self._truth(results[0], "the body's condition output")
            new = [np.asarray(value) for value in results[1:1 + count]]
            self._check_carried(carried, new, step)
            carried = new
            for k, rows in enumerate(scans):
                rows.append(np.asarray(results[1 + count + k]))
            step += 1
        outputs = [np.array(value, copy=True) for value in carried]
        for k, rows in enumerate(scans):
            if rows:
                outputs.append(np.stack(rows))
            else:
                shape, dtype = self._output_spec(count + k, inputs)
                outputs.append(np.zeros((0, *shape[1:]), dtype))
        return outputs

    # ---- inference -----------------------------------------------------------------

    def infer_through(self, in_values: list[Any], what: str) -> tuple[list[Any], list[Any]]:
        """(inputs filled, outputs) of shape ("shape") or dtype ("dtype")
        inference through the bodies; ShapeUnknownError while a body output
        cannot be inferred yet."""
        attrs = self.node_attrs
        assert attrs is not None
        shaped = what == "shape"
        filled = list(in_values)
        outs: list[list[Any]] = []
        for index, body in enumerate(self.bodies):
            given = []
            for source in self.sources[index]:
                kind = source[0]
                if kind in ("in", "var"):
                    given.append(in_values[source[-1]])
                elif kind == "slice":
                    value = in_values[source[1]]
                    given.append(value[1:] if shaped and value is not None else value)
                elif kind == "iter":
                    given.append(() if shaped else np.dtype(np.int64))
                else:
                    given.append(() if shaped else np.dtype(np.bool_))
            body_in, body_out = _infer_body(body, given, what, self._where(), index)
            for source, value in zip(self.sources[index], body_in):
                if value is None or source[0] in ("iter", "cond"):
                    continue
                position = source[-1]
                if source[0] == "slice":
                    if not shaped and filled[position] is None:
                        filled[position] = value
                    continue  # the extent of axis 0 is the data's own
                if filled[position] is None:
                    filled[position] = value
            outs.append(body_out)
        if any(value is None for value in outs[1 if self.name == "_cond" else -1]):
            raise ShapeUnknownError(f"{self._where()}: a body output's {what} is not known yet")
        return filled, self._outputs_from(attrs, in_values, outs, shaped)

    def _outputs_from(self, attrs: Attrs, in_values: list[Any], outs: list[list[Any]],
                      shaped: bool) -> list[Any]:
        self._check_carried_specs(attrs, in_values, outs[-1], shaped)
        if self.name == "_cond":
            then, other = outs[1], outs[2]
            if len(then) != len(other):
                raise GraphError(f"{self._where()}: the then body has {len(then)} outputs, "
                                 f"the else body {len(other)}")
            for k, (a, b) in enumerate(zip(then, other)):
                if b is not None and a != b:
                    raise ShapeError(f"{self._where()}: output {k} is {a} in the then body "
                                     f"but {b} in the else body")
            return list(then)
        body = outs[-1]
        if self.name == "_foreach":
            data = [in_values[s[1]] for s in self.sources[0] if s[0] == "slice"]
            if shaped and any(value is None for value in data):
                raise ShapeUnknownError(f"{self._where()}: the data's shape is not known yet")
            length = data[0][0] if shaped else None
            stacked = [(length, *value) if shaped else value
                       for value in body[:attrs.num_out_data]]
            return stacked + list(body[attrs.num_out_data:])
        if self.name == "_while_loop":
            stacked = [(attrs.max_iterations, *value) if shaped else value
                       for value in body[:attrs.num_out_data]]
            return stacked + list(body[attrs.num_out_data:])
        count = attrs.num_carried
        # Scan outputs are as long as the loop runs: known only after it
        # (0 here; the runner takes the length the loop produced).
        scans = [(0, *value) if shaped else value for value in body[1 + count:]]
        return list(body[1:1 + count]) + scans

    def _check_carried_specs(self, attrs: Attrs, in_values: list[Any], body: list[Any],
                             shaped: bool) -> None:
        """A loop-carried value keeps its shape and dtype across iterations."""
        if self.name == "_cond":
            return
        first = 1 if self.name == "_loop" else attrs.num_out_data
        carried = sorted({source[1]: source[2] for sources in self.sources
                          for source in sources if source[0] == "var"}.items())
        for s, position in carried:
            before, after = in_values[position], body[first + s]
            if before is not None and after is not None and before != after:
                what = "shape" if shaped else "dtype"
                raise ShapeError(f"{self._where()}: loop-carried value {s} has {what} {before} "
                                 f"but its body makes it {after}")

    @property
    def dynamic_outputs(self) -> tuple[int, ...]:
        """Outputs whose length the loop decides at run time."""
        if self.name != "_loop":
            return ()
        attrs = self.node_attrs
        assert attrs is not None
        return tuple(range(attrs.num_carried, attrs.num_outputs))


def _infer_body(body: Any, given: list[Any], what: str, where: str,
                index: int) -> tuple[list[Any], list[Any]]:
    variables = body_inputs(body)
    if len(variables) != len(given):
        raise GraphError(f"{where}: body {index} has {len(variables)} inputs, its locations "
                         f"give {len(given)}")
    named = {body.nodes[k].name: value for k, value in zip(variables, given)
             if value is not None}
    try:
        if what == "shape":
            values = body.infer_shapes(named)
        else:
            values = body.infer_dtypes(named)
    except ShapeError as error:
        raise type(error)(f"{where}, body {index}: {error}") from None
    return ([values[body.entry_start[k]] for k in variables],
            [values[body.entry(node, output)] for node, output in body.heads])


def dynamic_entries(graph: Any) -> set[int]:
    """The entries of graph whose length a loop decides at run time (ONNX
    Loop's scan outputs), and those computed from them: their shapes are
    known only after the loop ran."""
    dynamic: set[int] = set()
    for k, op in enumerate(graph.ops):
        if op is None:
            continue
        if any(entry in dynamic for entry in graph.input_entries(k)):
            dynamic.update(graph.output_entries(k))
        elif isinstance(op, ControlFlowOp):
            dynamic.update(graph.entry_start[k] + output for output in op.dynamic_outputs)
    return dynamic


def evaluate(body: Any, inputs: Sequence[Any]) -> list[np.ndarray]:
    """A body graph run on the CPU path: inputs in body-input order."""
    values: dict[int, Any] = {}
    variables = body_inputs(body)
    if len(variables) != len(inputs):
        raise GraphError(f"a body with {len(variables)} inputs run with {len(inputs)}")
    for k, value in zip(variables, inputs):
        values[body.entry_start[k]] = np.asarray(value)
    for k, node in enumerate(body.nodes):
        op, attrs = body.ops[k], body.attrs[k]
        if op is None:
            continue
        try:
            results = op.run(attrs, [values[e] for e in body.input_entries(k)])
        except OperatorError as error:
            if type(error) not in (OperatorError, ShapeError):
                raise
            raise type(error)(f"node {node.name!r} ({node.op}): {error}") from None
        for output, value in enumerate(results):
            values[body.entry_start[k] + output] = value
    return [values[body.entry(node, output)] for node, output in body.heads]


# ---- binding a node's bodies ---------------------------------------------------------


def _sources(name: str, attrs: Attrs, bodies: Sequence[Any], inputs: int,
             where: str) -> tuple[tuple[Source, ...], ...]:
    counts = [len(body_inputs(body)) for body in bodies]

    def check(locs: Sequence[int], what: str, limit: int) -> None:
        for loc in locs:
            if loc >= limit:
                raise GraphError(f"{where}: {what} has location {loc}, beyond its "
                                 f"{limit} entries")

    def by_locs(locs: Sequence[int], body: int, what: str) -> list[Source]:
        if len(locs) != counts[body]:
            raise GraphError(f"{where}: {what} has {len(locs)} locations for the "
                             f"{counts[body]} inputs of its body")
        check(locs, what, inputs)
        return [("in", loc) for loc in locs]

    if name == "_cond":
        return tuple(tuple(by_locs(getattr(attrs, f"{part}_input_locs"), index,
                                   f"{part}_input_locs"))
                     for index, part in enumerate(("cond", "then", "else")))
    if name == "_foreach":
        data, states, remain = attrs.in_data_locs, attrs.in_state_locs, attrs.remain_locs
        if len(data) + len(states) + len(remain) != inputs or (
                sorted([*data, *states, *remain]) != list(range(counts[0]))):
            raise GraphError(f"{where}: in_data_locs, in_state_locs and remain_locs must "
                             f"place its {inputs} inputs on the body's {counts[0]} inputs")
        slots: list[Source] = [("in", 0)] * counts[0]
        for d, loc in enumerate(data):
            slots[loc] = ("slice", d)
        for s, loc in enumerate(states):
            slots[loc] = ("var", s, len(data) + s)
        for r, loc in enumerate(remain):
            slots[loc] = ("in", len(data) + len(states) + r)
        return (tuple(slots),)
    if name == "_while_loop":
        cond_locs, func_locs = attrs.cond_input_locs, attrs.func_input_locs
        by_locs(cond_locs, 0, "cond_input_locs")
        by_locs(func_locs, 1, "func_input_locs")
        check(attrs.func_var_locs, "func_var_locs", len(func_locs))
        first = {func_locs[position]: s for s, position in enumerate(attrs.func_var_locs)}
        return tuple(tuple(("var", first[loc], loc) if loc in first else ("in", loc)
                           for loc in locs) for locs in (cond_locs, func_locs))
    locs = attrs.body_input_locs
    if len(locs) != counts[0]:
        raise GraphError(f"{where}: body_input_locs has {len(locs)} locations for the "
                         f"{counts[0]} inputs of its body")
    check(locs, "body_input_locs", inputs)
    slots = []
    for loc in locs:
        if loc == 0:
            slots.append(("iter",))
        elif loc == 1:
            slots.append(("cond",))
        elif loc < 2 + attrs.num_carried:
            slots.append(("var", loc - 2, loc))
        else:
            slots.append(("in", loc))
    return (tuple(slots),)


def bind_bodies(op: OpDef, attrs: Attrs, node: Node, graph_type: Any) -> OpDef:
    """The operator of a control-flow node: op (the registry's entry) with
    the node's bodies built as graphs (graph_type, acc_host.graph.Graph)."""
    where = f"node {node.name!r} ({node.op})"
    expected = BODIES[op.name]
    if len(node.subgraphs) != len(expected):
        raise GraphError(f"{where} needs {len(expected)} subgraphs ({', '.join(expected)}), "
                         f"has {len(node.subgraphs)}")
    bodies = []
    for index, body in enumerate(node.subgraphs):
        try:
            bodies.append(graph_type([(head, output) for head, output, _ in body.heads]))
        except (GraphError, OperatorError) as error:
            raise type(error)(f"{where}, subgraph {index} ({expected[index]}): {error}") from None
    sources = _sources(op.name, attrs, bodies, len(op.input_names(attrs)), where)
    body_outputs = len(bodies[-1].heads) - (1 if op.name == "_loop" else 0)
    if op.name == "_cond" and len(bodies[0].heads) != 1:
        raise GraphError(f"{where}: the cond body must have one output")
    if op.name == "_while_loop" and len(bodies[0].heads) != 1:
        raise GraphError(f"{where}: the cond body must have one output")
    if body_outputs != attrs.num_outputs:
        raise GraphError(f"{where}: num_outputs is {attrs.num_outputs}, its body gives "
                         f"{body_outputs}")
    values = {f.name: getattr(op, f.name) for f in fields(op) if f.init}
    bound = ControlFlowOp(**values, bodies=tuple(bodies), sources=sources, node_name=node.name,
                          node_attrs=attrs)

    def infer_shape(_attrs: Attrs, shapes: list[Any]) -> Any:
        return bound.infer_through(list(shapes), "shape")

    def infer_type(_attrs: Attrs, dtypes: list[Any]) -> Any:
        return bound.infer_through(list(dtypes), "dtype")

    def compute(run_attrs: Attrs, inputs: list[np.ndarray]) -> list[np.ndarray]:
        return bound.execute(run_attrs, inputs)

    object.__setattr__(bound, "infer_shape", infer_shape)
    object.__setattr__(bound, "infer_type", infer_type)
    object.__setattr__(bound, "compute", compute)
    return bound
