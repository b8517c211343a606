-- Rolodex schema, version 9: webhooks (API.md section 12; webhooks.go explains the worker).
--
-- An endpoint is where a company wants its events posted; events lists the types, families
-- ("contact.*") or "*" it takes. secret signs what is posted and is shown once, at creation.
-- A delivery is one event owed to one endpoint, written by the statement that writes the event (in
-- the transaction of the change). The worker takes due pending deliveries through
-- webhook_deliveries_due; next_attempt_at is also the lease of one being sent, so a server that dies
-- mid-delivery leaves it due again when the lease runs out. Deliveries go with their endpoint, and
-- with their event when events pass the retention.
CREATE TABLE webhook_endpoints (
    company_id      bigint  NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    id              bigint  GENERATED ALWAYS AS IDENTITY,
    url             text    NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    events          text[]  NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 32),
    description     text,
    secret          text    NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    disabled_reason text,
    created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
    updated_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
    PRIMARY KEY (company_id, id)
);

CREATE TABLE webhook_deliveries (
    company_id       bigint  NOT NULL,
    id               bigint  GENERATED ALWAYS AS IDENTITY,
    endpoint_id      bigint  NOT NULL,
    event_id         bigint  NOT NULL,
    event_type       text    NOT NULL,
    status           text    NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error       text,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
    PRIMARY KEY (company_id, id),
    FOREIGN KEY (company_id, endpoint_id) REFERENCES webhook_endpoints ON DELETE CASCADE,
    FOREIGN KEY (company_id, event_id) REFERENCES events ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (company_id, endpoint_id, id);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (company_id, event_id);
