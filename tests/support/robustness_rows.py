"""The rows of docs/robustness.md's tables tested outside
hardening/test_bad_input.py, which checks that every row of the page has
its test: row id -> the test's name, in hardening/test_misbehaving.py for
MISBEHAVING_ROWS, in hardening/test_hardening.py or "module:test" in another
test module for HARDENING_ROWS. The tests are found by reading the modules'
source (defined_tests), not by importing them: test modules never import
one another."""

from __future__ import annotations

import ast

from .paths import TESTS

__all__ = ["HARDENING_ROWS", "MISBEHAVING_ROWS", "defined_tests"]

# "Hostile plugins and limits": hardening/test_hardening.py, or module:test.
HARDENING_ROWS = {
    "plugin-num-acc-huge": "test_a_huge_device_count_is_refused_at_load",
    "isolated-reply-length-huge": "test_a_made_up_reply_length_kills_the_child",
    "isolated-output-overrun": "test_an_output_overrun_is_caught_in_the_guard",
    "plugin-output-overrun-checked": "test_an_output_overrun_is_caught_in_checked_mode",
    "plugin-device-output-overrun-checked":
        "test_device_guards:test_a_few_bytes_past_an_output_are_caught_in_checked_mode",
    "limit-bind-planned-total": "test_a_bind_is_checked_against_its_planned_total",
    "limit-imperative-call-planned":
        "test_imperative_limit:test_a_huge_result_is_refused_before_allocating",
    "limit-onnx-folding-planned": "test_import_time_folding_is_checked_with_its_copies",
    "cache-untrusted-directory": "test_model_cache:test_an_untrusted_cache_directory_is_not_used",
    "cache-untrusted-entry": "test_model_cache:test_an_entry_with_untrusted_files_is_rebuilt",
    "cache-planted-entry": "test_cache_binding:test_a_planted_entry_is_refused_and_rebuilt",
    "cache-stale-temporaries":
        "test_model_cache:test_stale_temporaries_are_cleaned_when_the_cache_opens",
    "cache-directory-unusable": "test_model_cache:test_an_unusable_cache_directory_is_bypassed",
    "onnx-axis-out-of-range": "test_out_of_range_axes_and_splits_are_refused",
    **{row: "test_raw_exceptions_are_typed" for row in (
        "json-integer-too-long", "json-shape-hint-too-deep", "onnx-depth-to-space-zero",
        "onnx-lrn-size-zero", "ndarray-load-directory", "ndarray-load-missing",
        "ndarray-load-not-a-path", "onnx-import-directory", "arg-assign-wrong-shape",
        "onnx-backend-initializer-input")},
    "params-duplicate-name": "test_duplicate_names_warn_on_read_and_are_refused_on_write",
    "discovery-not-a-file":
        "test_safe_discovery:test_entries_that_are_not_library_files_are_reported",
    "plugin-crash-reported": "test_an_in_process_crash_names_the_plugin_call",
    "plugin-exit-zero": "test_an_exit_inside_infer",
    "onnx-index-out-of-range-cpu": "test_out_of_range_indices_are_typed_on_the_cpu_path",
    "executor-concurrent-output-reads":
        "test_concurrency:test_unlocked_output_reads_see_whole_forwards",
    "executor-weights-written-during-forward":
        "test_concurrency:test_weights_written_during_forwards_are_whole",
}

# "Misbehaving plugins": hardening/test_misbehaving.py.
MISBEHAVING_ROWS = {
    **{f"plugin-{mode.replace('_', '-')}": "test_a_broken_supported_ops_answer_is_a_contract_error"
       for mode in ("ids_out_of_range", "ids_negative", "ids_unsorted", "ids_duplicate",
                    "ids_variable", "ids_count_overflow", "ids_count_unset", "ids_write_past")},
    "plugin-supported-fail": "test_a_failing_supported_ops_fails_the_bind",
    "plugin-supported-fail-silent": "test_a_failing_supported_ops_fails_the_bind",
    **{f"plugin-{mode.replace('_', '-')}": "test_a_failed_forward_leaves_the_executor_usable"
       for mode in ("load_fail", "load_fail_silent", "load_oom", "infer_fail",
                    "infer_fail_silent", "infer_oom", "infer_bad_status")},
    "plugin-failure-not-read": "test_a_failure_reaches_the_arrays_of_later_forwards_until_read",
    "plugin-load-unsupported": "test_a_plugin_that_declines_to_compile_runs_on_the_cpu",
    "plugin-imperative-failure": "test_a_failed_imperative_operator_leaves_the_context_usable",
    "plugin-outputs-unwritten": "test_unwritten_outputs_are_not_detected_by_default",
    "plugin-outputs-unwritten-checked": "test_checked_outputs_catch_unwritten_elements",
    "plugin-outputs-partial-checked": "test_checked_outputs_catch_unwritten_elements",
    "plugin-slow-threaded": "test_a_slow_plugin_holds_up_only_its_own_device",
    "plugin-slow-naive": "test_a_slow_plugin_blocks_only_the_calling_thread_under_naive_engine",
    "plugin-crash": "test_a_crashing_plugin_kills_only_its_process",
}


def defined_tests(module: str) -> set[str]:
    """The names of the functions defined at the top of the test module
    (a file name without .py, anywhere under tests/)."""
    (path,) = TESTS.rglob(f"{module}.py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
