"""Provisioning workflow tasks."""
