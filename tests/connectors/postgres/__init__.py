"""Tests of the PostgreSQL connector, against real PostgreSQL servers and Debezium's recorded events."""
