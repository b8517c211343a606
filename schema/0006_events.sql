-- Rolodex schema, version 6: events, the change feed (API.md section 11; events.go explains it).
--
-- An event is written in the transaction of the change it records. xid is that transaction's id:
-- the feed serves events in (xid, id) order, only of transactions older than every one still
-- running, which is what makes it gap-free. Events older than the retention are deleted in
-- batches, oldest first through the created_at index.
CREATE TABLE events (
    company_id bigint NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    id         bigint GENERATED ALWAYS AS IDENTITY,
    xid        xid8   NOT NULL DEFAULT pg_current_xact_id(),
    type       text   NOT NULL,
    created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
    request_id text   NOT NULL,
    object     text   NOT NULL,
    previous   text,
    PRIMARY KEY (company_id, id)
);
CREATE INDEX events_feed ON events (company_id, xid, id);
CREATE INDEX events_created_at ON events (created_at);
