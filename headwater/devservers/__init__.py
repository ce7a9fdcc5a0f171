"""Throwaway database servers for tests, the demo and the benchmarks.

Each server runs from the distribution's binaries in a temporary directory, on a free loopback
port, as an unprivileged user when the caller is root (PostgreSQL and MariaDB refuse to run as
root), and is removed when stopped.
"""
