"""Stands in for Huawei's msprobe package in test_dump_precision_debugger.py:
a real msprobe on sys.path must be imported, not the shim's."""
