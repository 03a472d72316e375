"""Operators: the registry and the built-in operator definitions."""

from .registry import OpDef, all_ops, find, get, register

__all__ = ["OpDef", "all_ops", "find", "get", "register"]
