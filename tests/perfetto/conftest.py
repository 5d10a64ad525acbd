"""Lets the tests import trace_checks from this folder."""
