"""Adapters that speak each model's wire protocol (one folder per protocol)."""
