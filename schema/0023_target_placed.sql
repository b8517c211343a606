-- Rolodex schema, version 23: the target rows written since a snapshot, by an index (timeline.go).
--
-- A timeline page read with a cursor finds the activities moved, or given the object as a target,
-- since its walk began: the target rows whose placed the walk's snapshot did not see
-- (timelineMovedSQL). It walked all of the object's target rows to find them: a business record's
-- 400, for none in most walks. Every row the snapshot did not see has placed at or above its
-- xmin, so a range of this index holds them: a few rows, or none, where the walk read 400 (188
-- buffers, against 4). It includes what the walk reads of them, index-only. Without the include, the
-- page's cached plan (generic: it cannot know that one record has 400 target rows) chose the walk of
-- associations_targets_occurred, whose index-only scan it priced below this index's heap reads.
CREATE INDEX associations_targets_placed ON associations (company_id, b_kind, b_id, placed) INCLUDE (a_id, occurred_at, type)
    WHERE a_kind = 'activities' AND label = '';
