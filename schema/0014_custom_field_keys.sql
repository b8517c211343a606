-- Rolodex schema, version 14: the keys of each company's live custom fields, a row per object,
-- rewritten by each field create and delete (customfields.go: saveCustomKeys) and read with every
-- object (customColumns). A subquery on this primary key costs a statement's planning 0.02 ms; the
-- same subquery on custom_fields, whose partial indexes the planner weighs, cost 0.15 ms, and took a
-- list page and a coalesced retrieve to 0.75x the throughput of the tree before custom fields once
-- PostgreSQL planned each execution anew (0.94-0.98x with this table: bench/RESULTS.md).
CREATE TABLE custom_field_keys (
    company_id bigint NOT NULL REFERENCES companies (id) ON DELETE CASCADE,
    object     text   NOT NULL,
    keys       text   NOT NULL, -- "id:key,..." by id: the live fields of the object
    PRIMARY KEY (company_id, object)
);
INSERT INTO custom_field_keys (company_id, object, keys)
SELECT company_id, object, string_agg(id || ':' || key, ',' ORDER BY id)
FROM custom_fields WHERE deleted_at IS NULL GROUP BY company_id, object;
