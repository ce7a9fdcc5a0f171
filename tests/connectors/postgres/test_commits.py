"""The record of the transactions the stream received (connectors/postgres/commits.py), without a server."""

from __future__ import annotations

from headwater.connectors.postgres.commits import RecentCommits


def test_only_the_commits_received_before_the_position_are_named():
    commits = RecentCommits()
    commits.add(10, 1000)
    commits.add(12, 2000)
    commits.add(11, 3000)  # xids are not in commit order
    assert commits.committed_before([10, 11, 12, 13], 2500) == [10, 12]
    assert commits.committed_before([10, 11, 12], 1000) == []
    assert commits.committed_before([], 9999) == []


def test_the_latest_transactions_are_kept():
    commits = RecentCommits(keep=3)
    for xid in range(1, 6):
        commits.add(xid, xid * 100)
    assert commits.committed_before(range(1, 6), 10_000) == [3, 4, 5]
    commits.add(3, 900)  # an xid met again after a wraparound: its newest commit, now the latest kept
    commits.add(6, 1000)
    assert commits.committed_before(range(1, 7), 10_000) == [3, 5, 6]
    assert commits.committed_before([3], 800) == []
