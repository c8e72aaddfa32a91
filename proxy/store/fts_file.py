"""SQLite's full-text indexes, kept in a file of their own beside the database.

``messages_fts`` (search: every message, with its text, for snippets) and
``recall_fts`` (recall: user and assistant messages under rowid
``(session key << 24) + seq``, contentless) live in ``<db>-fts``. Writing
them there takes that file's write lock, so the turn path, which writes the
main file, never queues behind an index batch.

The main file logs every change the indexes must learn in ``fts_log``
(migration sqlite_0007), in the transaction that makes the change. The
functions here run on the index file's own connection, with the main file
attached as ``state``: :func:`index_batch` replays the next entries in order
and records the last one applied, in one transaction of the index file, so a
crash anywhere leaves the two files consistent and a replay never applies an
entry twice. Readers attach the index file as ``fts``.

The indexes are derived data. :func:`prepare` rebuilds the file from
``messages`` when it is new, unreadable or of another version.
"""

from __future__ import annotations

import logging
import sqlite3

__all__ = ["INDEX_SCHEMA", "begin_batch", "index_batch", "index_path", "prepare"]

logger = logging.getLogger("hermes.store")

# Bump when the tables below change: the file is then rebuilt.
VERSION = 1

INDEX_SCHEMA = "fts"
"""The name readers attach the index file under."""

# `token`: the database's index_identity; `applied`: the last fts_log entry
# these indexes include.
STATE_TABLE = "CREATE TABLE index_state (version INTEGER, token TEXT, applied INTEGER NOT NULL)"

TABLES = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, tokenize='porter unicode61')",
    "CREATE VIRTUAL TABLE recall_fts USING fts5(content, content='', tokenize='porter unicode61')",
    STATE_TABLE,
)

# The recall index's rowid for a row ``m`` of messages or of fts_log (same
# columns); NULL for messages recall skips.
RECALL_ROWID = (
    "CASE WHEN m.role IN ('user', 'assistant') AND m.content <> '' AND m.seq < 16777216 "
    "THEN (SELECT (r.key << 24) + m.seq FROM state.recall_sessions r "
    "WHERE r.session_id = m.session_id) END"
)


def _add_to_recall(rows: str) -> str:
    """The statement adding ``rows`` (messages or log entries, as ``m``) to the recall index."""
    return (
        "INSERT INTO main.recall_fts (rowid, content) SELECT recall, content FROM "
        f"(SELECT {RECALL_ROWID} AS recall, m.content FROM {rows}) WHERE recall IS NOT NULL"
    )


def index_path(path: str) -> str:
    """Where the indexes of the database at ``path`` are kept."""
    return path + "-fts"


def prepare(conn: sqlite3.Connection, state_path: str) -> None:
    """Attach the main database as ``state``; (re)build the indexes unless they are its own.

    They are rebuilt when the file is new, of another version, built for
    another database, or ahead of this one's log (a database restored from
    an older copy).
    """
    conn.execute("ATTACH DATABASE ? AS state", (state_path,))
    conn.execute(STATE_TABLE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    begin_batch(conn)
    try:
        if not _current(conn):
            _rebuild(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def begin_batch(conn: sqlite3.Connection) -> None:
    """Start a transaction holding the index file's write lock, and only that one.

    ``BEGIN IMMEDIATE`` would take the write lock of every attached file,
    the main database's included, for as long as the batch runs. A write as
    the transaction's first statement takes this file's lock alone (waiting
    for it, if another process indexes), and the main database is only read.
    """
    conn.execute("BEGIN")
    conn.execute("UPDATE main.index_state SET applied = applied")


def _current(conn: sqlite3.Connection) -> bool:
    try:
        row = conn.execute("SELECT version, token, applied FROM main.index_state").fetchone()
    except sqlite3.OperationalError:
        return False  # a new file
    return row is not None and (row[0], row[1]) == (VERSION, _token(conn)) and row[2] <= _head(conn)


def _token(conn: sqlite3.Connection) -> str:
    return str(conn.execute("SELECT token FROM state.index_identity").fetchone()[0])


def _head(conn: sqlite3.Connection) -> int:
    """The last entry ever logged in the main database."""
    row = conn.execute("SELECT seq FROM state.sqlite_sequence WHERE name = 'fts_log'").fetchone()
    return int(row[0]) if row else 0


def _rebuild(conn: sqlite3.Connection) -> None:
    """Index every stored message, in the transaction the caller holds."""
    for (name,) in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
        "AND name IN ('messages_fts', 'recall_fts', 'index_state')"
    ).fetchall():
        conn.execute(f'DROP TABLE main."{name}"')
    for statement in TABLES:
        conn.execute(statement)
    # One read snapshot of the main file: every message stored up to the
    # log's last entry, and nothing after it.
    applied = _head(conn)
    count = conn.execute("SELECT COUNT(*) FROM state.messages").fetchone()[0]
    if count:
        logger.info("building the full-text indexes of %d stored messages", count)
    conn.execute(
        "INSERT INTO main.messages_fts (rowid, content) SELECT id, content FROM state.messages"
    )
    conn.execute(_add_to_recall("state.messages m"))
    conn.execute("INSERT INTO main.index_state VALUES (?, ?, ?)", (VERSION, _token(conn), applied))


def index_batch(conn: sqlite3.Connection, limit: int | None) -> tuple[int, int]:
    """Apply the next ``limit`` (or all) logged changes; return how many, and the last applied."""
    begin_batch(conn)
    try:
        applied: int = conn.execute("SELECT applied FROM main.index_state").fetchone()[0]
        entries = conn.execute(
            f"SELECT m.entry, m.id, {RECALL_ROWID}, m.content, m.removed FROM state.fts_log m "
            "WHERE m.entry > ? ORDER BY m.entry" + (" LIMIT ?" if limit else ""),
            (applied, limit) if limit else (applied,),
        ).fetchall()
        if not entries:
            conn.execute("ROLLBACK")
            return 0, applied
        last = entries[-1][0]
        if not any(entry[4] for entry in entries):
            # Only additions (the usual case): two statements for the batch.
            span = "state.fts_log m WHERE m.entry > ? AND m.entry <= ?"
            conn.execute(
                "INSERT INTO main.messages_fts (rowid, content) "
                f"SELECT m.id, m.content FROM {span}",
                (applied, last),
            )
            conn.execute(_add_to_recall(span), (applied, last))
        else:
            for _, message_id, recall, content, removed in entries:
                _apply(conn, message_id, recall, content, removed=bool(removed))
        conn.execute("UPDATE main.index_state SET applied = ?", (last,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(entries), last


def _apply(
    conn: sqlite3.Connection,
    message_id: int,
    recall: int | None,
    content: str | None,
    *,
    removed: bool,
) -> None:
    if removed:
        conn.execute("DELETE FROM main.messages_fts WHERE rowid = ?", (message_id,))
        if recall is not None:
            conn.execute(
                "INSERT INTO main.recall_fts (recall_fts, rowid, content) VALUES ('delete', ?, ?)",
                (recall, content),
            )
    else:
        conn.execute(
            "INSERT INTO main.messages_fts (rowid, content) VALUES (?, ?)", (message_id, content)
        )
        if recall is not None:
            conn.execute(
                "INSERT INTO main.recall_fts (rowid, content) VALUES (?, ?)", (recall, content)
            )
