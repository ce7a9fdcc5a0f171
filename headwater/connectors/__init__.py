"""Connectors: one package per database, each implementing the contract in `connectors.base`."""
