"""Tests of the framework adapters (a package, so that its conftest does not
shadow tests/conftest.py, which these tests import helpers from)."""
