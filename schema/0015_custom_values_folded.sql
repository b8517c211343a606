-- Rolodex schema, version 15: only text and email values are case-folded. Their filters compare
-- lower(text_value) (customfields.go: addCustomFilter); a select, url, date, boolean or multiSelect
-- value is compared as it is, and its entry in custom_values_folded was written for nothing, at each
-- write of the value. custom_values.folded marks the rows that index serves.
ALTER TABLE custom_values ADD COLUMN folded boolean NOT NULL DEFAULT false;
UPDATE custom_values v SET folded = true FROM custom_fields f
WHERE f.company_id = v.company_id AND f.id = v.field_id AND f.type IN ('text', 'email');
DROP INDEX custom_values_folded;
CREATE INDEX custom_values_folded ON custom_values (company_id, field_id, lower(text_value), object_id) WHERE folded;
