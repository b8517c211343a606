-- Rolodex schema, version 5: the answers that Idempotency-Key keeps (API.md section 10).
--
-- One row a company and key, written in the transaction of the change it answers, so a crash leaves
-- both or neither. fingerprint is SHA-256 of the request's method, path, query and body: the same key
-- with another request is refused. Rows older than 24 hours count as gone and are deleted in
-- batches, oldest first, through the created_at index.
CREATE TABLE idempotency_keys (
    company_id  bigint NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    key         text   NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint bytea  NOT NULL CHECK (length(fingerprint) = 32),
    status      integer NOT NULL,
    location    text   NOT NULL,
    etag        text   NOT NULL,
    body        bytea  NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
