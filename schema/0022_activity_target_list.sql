-- Rolodex schema, version 22: an activity's row lists its targets (activities.go).
--
-- Every read of an activity shows its targets, which were read from its target rows by a probe of
-- associations_a for each activity: of the 965 buffers of a page of 100 of a record's open tasks,
-- 460 were those probes, and half of PostgreSQL's time for it (pgbench, docs/scaling.md). targets
-- holds them as kind:id ('business:7'), in the order of their rows' ids, written by the statements
-- that write the target rows (associations.go: insertAssociations, deleteAssociations,
-- removeAssociations; an activity's create writes them with its row).
ALTER TABLE activities ADD COLUMN targets text[] NOT NULL DEFAULT '{}';

UPDATE activities a SET targets = t.targets
    FROM (SELECT company_id, a_id, array_agg(b_kind || ':' || b_id ORDER BY id) AS targets FROM associations
        WHERE a_kind = 'activities' AND label = '' GROUP BY company_id, a_id) t
    WHERE a.company_id = t.company_id AND a.id = t.a_id;
