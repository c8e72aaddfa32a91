-- Messages are indexed for full-text search (messages_fts for search,
-- recall_fts for recall) in batches, not one by one in the transaction that
-- stores them: FTS5 writes a new index segment per transaction, which made
-- indexing ~30% of a turn's cost. New messages are queued in fts_pending (a
-- cheap insert) and indexed by the store's index_pending(), which the server
-- runs every fraction of a second and every search runs first, so searches
-- always see every stored message. Recall reads only archived messages,
-- which were indexed long before they left the window.
CREATE TABLE fts_pending (id INTEGER PRIMARY KEY);

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TRIGGER recall_fts_insert;
DROP TRIGGER recall_fts_delete;
DROP TRIGGER recall_fts_update;

CREATE TRIGGER messages_index_queue AFTER INSERT ON messages BEGIN
    INSERT INTO fts_pending (id) VALUES (new.id);
END;

-- One trigger per event, so the order is certain: an indexed row leaves both
-- indexes; a row still queued only leaves the queue (deleting a row an FTS5
-- index never held would corrupt it).
CREATE TRIGGER messages_index_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    INSERT INTO recall_fts (recall_fts, rowid, content)
        SELECT 'delete', (key << 24) + old.seq, old.content FROM recall_sessions
        WHERE session_id = old.session_id
          AND old.role IN ('user', 'assistant') AND old.content <> '' AND old.seq < 16777216
          AND NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    DELETE FROM fts_pending WHERE id = old.id;
END;

CREATE TRIGGER messages_index_update AFTER UPDATE OF content ON messages
WHEN NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
    INSERT INTO recall_fts (recall_fts, rowid, content)
        SELECT 'delete', (key << 24) + old.seq, old.content FROM recall_sessions
        WHERE session_id = old.session_id
          AND old.role IN ('user', 'assistant') AND old.content <> '' AND old.seq < 16777216;
    INSERT INTO recall_fts (rowid, content)
        SELECT (key << 24) + new.seq, new.content FROM recall_sessions
        WHERE session_id = new.session_id
          AND new.role IN ('user', 'assistant') AND new.content <> '' AND new.seq < 16777216;
END;

-- A session id can come back (an exported session imported again after it
-- was deleted): its recall key, kept on purpose, is then simply reused.
DROP TRIGGER recall_sessions_insert;
CREATE TRIGGER recall_sessions_insert AFTER INSERT ON sessions BEGIN
    INSERT INTO recall_sessions (session_id)
        SELECT new.id WHERE NOT EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = new.id);
END;
