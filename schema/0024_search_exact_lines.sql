-- Rolodex schema, version 24: the exact search hits of business records, organizations and
-- activities from indexes of their own, as a contact's (version 21), for a search's first page read
-- by one statement whose plan PostgreSQL keeps (search.go, quickSQL).
--
-- Such a plan is made for no text in particular, so its work must be bounded whatever the text is.
-- A kind's exact hits (a field is q) were read from the trigram index, whose work grows with the
-- objects that hold q's trigrams, or by a walk of every id: a plan kept for "name 12" read all
-- 200,000 business records of the bench's company (0.3 s) to find none. Here each is one look-up.
-- A document's field may hold newlines, and q is exact where it is one of the document's lines
-- (strpos(doc, E'\n' || q || E'\n')), so each index holds its field's lines, folded as the document
-- folds them. search.go's searchKind.lines writes the same expressions, which is how PostgreSQL
-- matches them to the indexes.
CREATE INDEX business_search_exact ON business USING gin ((string_to_array(search_fold(title), E'\n')))
    WITH (fastupdate = off);
CREATE INDEX organizations_search_exact ON organizations USING gin ((string_to_array(search_fold(name), E'\n')))
    WITH (fastupdate = off);
CREATE INDEX activities_search_exact ON activities USING gin ((string_to_array(search_fold(subject), E'\n')))
    WITH (fastupdate = off);

-- The planner prices the look-ups by the indexes' statistics (as version 21 says).
ANALYZE business, organizations, activities;
