-- The full-text indexes move to a file of their own, beside the database
-- (<db>-fts, see proxy/store/fts_file.py). Indexing there takes that file's
-- write lock, not this one's, so a turn never waits behind an index batch
-- (measured: most of the slow requests at concurrency 1 were queued behind
-- one). The indexes are derived data: that file is rebuilt from `messages`
-- whenever it is missing or from another version, as on the first start
-- after this migration.
--
-- What the indexes must learn is logged here, in the same transaction as the
-- change itself: one row per message stored or removed, with what indexing
-- it needs (the recall index is contentless: removing a row takes its text;
-- its rowid comes from recall_sessions, whose rows outlive their session).
-- The index file records the last entry it applied and replays the rest in
-- order; applied entries are trimmed. AUTOINCREMENT: an entry number is
-- never reused, even after the log is emptied.
DROP TRIGGER messages_index_queue;
DROP TRIGGER messages_index_delete;
DROP TRIGGER messages_index_update;
DROP TABLE fts_pending;
DROP TABLE messages_fts;
DROP TABLE recall_fts;

CREATE TABLE fts_log (
    entry      INTEGER PRIMARY KEY AUTOINCREMENT,
    id         INTEGER NOT NULL,  -- messages.id: the search index's rowid
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    content    TEXT,
    removed    INTEGER NOT NULL   -- 0: index it, 1: un-index it
);

-- Names this database to its index file, which is rebuilt if it was built
-- for another one (a database deleted and created again beside an old index).
CREATE TABLE index_identity (token TEXT NOT NULL);
INSERT INTO index_identity VALUES (lower(hex(randomblob(16))));

CREATE TRIGGER messages_log_insert AFTER INSERT ON messages BEGIN
    INSERT INTO fts_log (id, session_id, seq, role, content, removed)
        VALUES (new.id, new.session_id, new.seq, new.role, new.content, 0);
END;

CREATE TRIGGER messages_log_delete AFTER DELETE ON messages BEGIN
    INSERT INTO fts_log (id, session_id, seq, role, content, removed)
        VALUES (old.id, old.session_id, old.seq, old.role, old.content, 1);
END;

CREATE TRIGGER messages_log_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO fts_log (id, session_id, seq, role, content, removed)
        VALUES (old.id, old.session_id, old.seq, old.role, old.content, 1);
    INSERT INTO fts_log (id, session_id, seq, role, content, removed)
        VALUES (new.id, new.session_id, new.seq, new.role, new.content, 0);
END;
