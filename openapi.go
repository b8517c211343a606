package main

import (
	"bytes"
	"compress/gzip"
	"context"
	_ "embed"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The OpenAPI document this server serves at GET /v1/openapi.json: the embedded api/openapi.json,
// and with an API key the same document with custom typed by the company's custom fields.

// openAPIDocument is the OpenAPI 3.1 description of this server. openapi_test.go holds its operations
// equal to the routes of addRoutes; clients/check.sh holds the server's answers to it.
//
//go:embed api/openapi.json
var openAPIDocument []byte

// handleCustomOpenAPI answers GET /v1/openapi.json: without a key the embedded document (custom a
// free-form object); with one (withAuth resolved it, withRateLimit counted it), custom typed by the
// company's fields of the kinds of object the key reads, for generated clients. A key that reads none
// of them gets the embedded document: it would learn nothing from the rest.
func handleCustomOpenAPI(st *store, log *slog.Logger) http.Handler {
	docs := newOpenAPIDocs(openAPIDocument)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenantOf(r)
		objects := readableObjects(t.scopes)
		if t.companyID == 0 || len(objects) == 0 {
			docs.plain.write(w, r)
			return
		}
		doc, err := docs.keyed(r.Context(), st, t.companyID, objects)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		doc.write(w, r)
	})
}

// readableObjects returns the kinds of object that carry custom (customObjects) whose read scope
// (contacts:read for contact, ...) scopes cover.
func readableObjects(scopes []string) []string {
	var objects []string
	for _, object := range customObjects {
		if covers(scopes, customTables[object]+":read") {
			objects = append(objects, object)
		}
	}
	return objects
}

// maxOpenAPICacheBytes bounds the keyed documents an openAPIDocs keeps: one of a company with 120
// select fields is 500 KB and its gzip 45 KB, so it holds about 60 such. Beyond it the least recently
// served go.
const maxOpenAPICacheBytes = 32 << 20

// openAPIDocs serves the document: the embedded one, gzipped once at start, and the keyed ones, each
// built once per change of its company's fields and kept while the fields stay as they were.
//
// A keyed request then costs one small query (fieldsPrintSQL) and a write of the kept gzip. With 120
// select fields (BenchmarkOpenAPIKeyed, the handler alone, gzip asked, 2 shared cores): 19.2 ms a
// request when each one parsed, typed, re-encoded and compressed the document; 11.5 ms building it
// from the raw JSON split at start; 0.21 ms from here. Through the test server and Go's client,
// which inflates the answer: 20.8, 12.5 and 2.2 ms.
type openAPIDocs struct {
	base  *openAPIBase
	plain servedDoc
	limit int // maxOpenAPICacheBytes; less in a test

	mu   sync.Mutex
	docs map[docKey]*cachedDoc
	size int    // bytes of docs' documents
	tick uint64 // counts the documents served from docs, to tell the least recently served
}

// docKey names a keyed document: its company, and the kinds of object its key reads, comma-separated.
type docKey struct {
	companyID int64
	objects   string
}

// cachedDoc is a keyed document, with the fieldsPrint of the fields it was built from.
type cachedDoc struct {
	fp   fieldsPrint
	doc  servedDoc
	used uint64 // the tick it was last served at
}

// fieldsPrint tells apart two states of a company's live fields of some kinds: how many there are, and
// an aggregate of each one's id and updated_at. A create adds a row, a delete takes one away, and an
// update of a label or options moves updated_at, which only grows (updateCustomField). It is not
// max(updated_at): that is the transaction's start, and two updates of different fields may commit
// in the other order, the later time first. Nor custom_field_keys, which a create and a delete
// rewrite but an update does not.
type fieldsPrint struct {
	n    int64
	hash int64
}

func (p *fieldsPrint) scanDest() []any { return []any{&p.n, &p.hash} }

// fieldsPrintSQL reads the fieldsPrint of the company $1's live fields of the kinds $2: a walk of
// custom_fields_key over them, one row back.
const fieldsPrintSQL = `SELECT count(*), coalesce(bit_xor(hashtextextended(id || ' ' || extract(epoch FROM updated_at), 0)), 0)
	FROM custom_fields WHERE company_id = $1 AND object = ANY($2) AND deleted_at IS NULL`

// newOpenAPIDocs splits doc, api/openapi.json, and gzips it, once.
func newOpenAPIDocs(doc []byte) *openAPIDocs {
	return &openAPIDocs{base: splitOpenAPI(doc), plain: newServedDoc(doc), limit: maxOpenAPICacheBytes, docs: make(map[docKey]*cachedDoc)}
}

// keyed returns the document of the company's key that reads objects: the one kept while its fields
// are as it was built from, else one built now and kept. Two requests that miss at once both build it
// (a few ms each); the last one's stays.
func (d *openAPIDocs) keyed(ctx context.Context, st *store, companyID int64, objects []string) (servedDoc, error) {
	key := docKey{companyID, strings.Join(objects, ",")}
	var fp fieldsPrint
	err := st.read(ctx, eachRow(fieldsPrintSQL, []any{companyID, objects}, func(p *fieldsPrint) { fp = *p }))
	if err != nil {
		return servedDoc{}, err
	}
	if doc, ok := d.get(key, fp); ok {
		return doc, nil
	}
	// A field changed after the print was read is in fields: the document is then newer than its print,
	// and the next request, reading the new print, builds it again.
	var fields []customField
	err = st.read(ctx, rowsInto[customField](&fields, customFields.selectSQL+` AND object = ANY($2) ORDER BY id`, companyID, objects))
	if err != nil {
		return servedDoc{}, err
	}
	doc := newServedDoc(d.base.typed(fields, objects))
	d.put(key, fp, doc)
	return doc, nil
}

// get returns the document kept for key if it was built from fields of that print, fp.
func (d *openAPIDocs) get(key docKey, fp fieldsPrint) (servedDoc, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.docs[key]
	if c == nil || c.fp != fp {
		return servedDoc{}, false
	}
	d.tick++
	c.used = d.tick
	return c.doc, true
}

// put keeps doc for key, in place of the one kept before, and drops the least recently served while
// the documents kept pass the limit. A document of more than a quarter of it is not kept: it would
// push out many others.
func (d *openAPIDocs) put(key docKey, fp fieldsPrint, doc servedDoc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.docs[key]; old != nil {
		d.size -= old.doc.size()
		delete(d.docs, key)
	}
	if doc.size() > d.limit/4 {
		return
	}
	d.tick++
	d.docs[key] = &cachedDoc{fp: fp, doc: doc, used: d.tick}
	d.size += doc.size()
	for d.size > d.limit {
		var lru docKey
		oldest := d.tick + 1
		for k, c := range d.docs { // a few dozen: a scan on a build is nothing beside the build
			if c.used < oldest {
				lru, oldest = k, c.used
			}
		}
		d.size -= d.docs[lru].doc.size()
		delete(d.docs, lru)
	}
}

// servedDoc is a document ready to send: its JSON, and the same gzipped, made once for every answer.
type servedDoc struct {
	json, gzip []byte
}

func newServedDoc(b []byte) servedDoc {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b) // into memory: no error
	zw.Close()
	return servedDoc{json: b, gzip: z.Bytes()}
}

func (d servedDoc) size() int { return len(d.json) + len(d.gzip) }

// write answers 200 with the document, as writeJSON would but with the gzip made once: compressing
// api/openapi.json with 3 fields typed in (345 KB) took 5.6 ms.
func (d servedDoc) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	body := d.json
	if r.Method != http.MethodHead && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = d.gzip
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// openAPIBase is the embedded document, compacted and split once, at start, into the members that a
// keyed document changes. The keyed document is these members with a few of their values replaced, and
// every other byte copied: no number, example or key order of api/openapi.json is decoded and
// re-encoded, so none can change (json.Unmarshal into any made 9223372036854775807 a float64,
// 9223372036854776000).
type openAPIBase struct {
	top, components, paths, schemas, parameters []member
}

// splitOpenAPI splits doc, api/openapi.json, for typed. It panics on a document that is not valid
// JSON, as the server starts: openapi_test.go holds the embedded one valid.
func splitOpenAPI(doc []byte) *openAPIBase {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		panic("api/openapi.json: " + err.Error())
	}
	b := &openAPIBase{top: objectMembers(compact.Bytes())}
	b.paths = objectMembers(memberRaw(b.top, "paths"))
	b.components = objectMembers(memberRaw(b.top, "components"))
	b.schemas = objectMembers(memberRaw(b.components, "schemas"))
	b.parameters = objectMembers(memberRaw(b.components, "parameters"))
	return b
}

// customSchemaNames are the names of the schemas of each kind of object that carries custom.
var customSchemaNames = map[string]string{"contact": "Contact", "business": "Business", "organization": "Organization", "activity": "Activity"}

// customExamples are the schemas whose example (or examples) hold an object of a kind with custom
// (written "custom": {}, or with a field of no company's). A keyed document writes there the company's
// fields, each null, as an object without values has them, so that the example fits the typed schema
// (clients/check.sh lints examples as errors). The rest of each example stays as it is.
var customExamples = map[string]string{"Contact": "contact", "Business": "business", "Event": "contact",
	"ContactMergeResult": "contact", "OrganizationMergeResult": "organization"}

// typed returns the document with custom typed by fields, the company's live fields in the order of
// their ids, for the kinds of object in objects; indented as api/openapi.json is, so that what it
// leaves alone reads byte for byte as there.
func (b *openAPIBase) typed(fields []customField, objects []string) []byte {
	schemas := slices.Clone(b.schemas)
	paths := slices.Clone(b.paths)
	params := slices.Clone(b.parameters)
	var added []member
	for _, object := range objects {
		of := slices.DeleteFunc(slices.Clone(fields), func(f customField) bool { return f.Object != object })
		name := customSchemaNames[object]
		custom, patch := customObjectSchemas(of)
		added = append(added, member{name + "Custom", custom}, member{name + "CustomPatch", patch})
		retypeCustom(schemas, name)
		retypeExamples(schemas, object, customNulls(of))
		addListParams(paths, params, customTables[object], name+"Sort", of)
	}
	schemas = placeCustomSchemas(schemas, added)
	components := replaceMembers(b.components, member{"schemas", appendMembers(nil, schemas)},
		member{"parameters", appendMembers(nil, params)})
	compact := replaceMembers(b.top, member{"paths", appendMembers(nil, paths)}, member{"components", components})
	var doc bytes.Buffer
	doc.Grow(len(compact) * 2)
	json.Indent(&doc, compact, "", "  ") // of what appendMembers wrote: valid
	doc.WriteByte('\n')
	return doc.Bytes()
}

// replaceMembers returns a copy of members with the value of each member of set's name replaced by
// set's, written as a JSON object.
func replaceMembers(members []member, set ...member) []byte {
	members = slices.Clone(members)
	for _, s := range set {
		if i := slices.IndexFunc(members, func(m member) bool { return m.name == s.name }); i >= 0 {
			members[i].raw = s.raw
		}
	}
	return appendMembers(nil, members)
}

// retypeCustom points custom of the schemas of the kind name (the object, its create and update, and
// its batch items) at name's typed schemas: the object's at nameCustom, the bodies' at nameCustomPatch.
func retypeCustom(schemas []member, name string) {
	for _, s := range []string{name, name + "Create", name + "Update", name + "BatchUpdateItem", name + "BatchUpsertItem"} {
		ref := []byte(`{"$ref":"#/components/schemas/` + name + `CustomPatch"}`)
		if s == name {
			ref = []byte(`{"$ref":"#/components/schemas/` + name + `Custom"}`)
		}
		i := slices.IndexFunc(schemas, func(m member) bool { return m.name == s })
		if i >= 0 { // business has no upsert
			schemas[i].raw = editMember(schemas[i].raw, []string{"properties", "custom"}, func(json.RawMessage) json.RawMessage { return ref })
		}
	}
}

// retypeExamples writes custom, the company's fields of object each null, in the examples of the
// schemas that customExamples names for object.
func retypeExamples(schemas []member, object string, custom []byte) {
	for i, s := range schemas {
		if customExamples[s.name] != object {
			continue
		}
		set := func(v json.RawMessage) json.RawMessage { return setCustom(v, custom) }
		raw := editMember(s.raw, []string{"example"}, set)
		schemas[i].raw = editMember(raw, []string{"examples"}, set)
	}
}

// placeCustomSchemas puts added, the typed schemas of custom, where CustomValues, the free-form one, is
// in schemas; CustomValues stays only while a schema still refers to it (a kind the document does not
// type).
func placeCustomSchemas(schemas, added []member) []member {
	i := slices.IndexFunc(schemas, func(m member) bool { return m.name == "CustomValues" })
	ref := []byte(`"#/components/schemas/CustomValues"`)
	if !slices.ContainsFunc(schemas, func(m member) bool { return bytes.Contains(m.raw, ref) }) {
		schemas = slices.Delete(schemas, i, i+1)
	}
	return slices.Insert(schemas, i, added...)
}

// editMember returns obj, a JSON object, with the value of the member at path (a name in obj, then in
// that member's object, ...) replaced by edit's answer to it; obj as it is when there is none.
func editMember(obj json.RawMessage, path []string, edit func(json.RawMessage) json.RawMessage) json.RawMessage {
	members := objectMembers(obj)
	i := slices.IndexFunc(members, func(m member) bool { return m.name == path[0] })
	if i < 0 {
		return obj
	}
	if len(path) == 1 {
		members[i].raw = edit(members[i].raw)
	} else {
		members[i].raw = editMember(members[i].raw, path[1:], edit)
	}
	return appendMembers(nil, members)
}

// setCustom returns the JSON value v with the object of each member named custom in it, at any depth,
// replaced by custom; everything else as it is.
func setCustom(v json.RawMessage, custom []byte) json.RawMessage {
	switch v[0] {
	case '{':
		members := objectMembers(v)
		for i, m := range members {
			if m.name == "custom" && m.raw[0] == '{' {
				members[i].raw = custom
			} else {
				members[i].raw = setCustom(m.raw, custom)
			}
		}
		return appendMembers(nil, members)
	case '[':
		elems := arrayElements(v)
		for i, e := range elems {
			elems[i] = setCustom(e, custom)
		}
		return appendArray(nil, elems)
	}
	return v
}

// arrayElements splits b, a valid JSON array without spaces between its tokens, into its elements.
func arrayElements(b []byte) (elems []json.RawMessage) {
	for i := 1; b[i] != ']'; {
		end := jsonEnd(b, i)
		elems = append(elems, b[i:end:end])
		if b[end] == ',' {
			end++
		}
		i = end
	}
	return elems
}

// appendArray appends elems, JSON values, as a JSON array.
func appendArray(b []byte, elems []json.RawMessage) []byte {
	b = append(b, '[')
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// addToArray returns arr, a JSON array without spaces, with elems appended.
func addToArray(arr json.RawMessage, elems []json.RawMessage) json.RawMessage {
	return appendArray(nil, append(arrayElements(arr), elems...))
}

// customValueSchemas are the JSON Schemas of the values of each type in custom, and of a list's filter
// on a field of the type (one value, never null; a multiSelect's names one option). OPTIONS stands for
// a select's option values.
var customValueSchemas = map[string]struct{ value, filter string }{
	"text":        {`{"type":["string","null"],"maxLength":1000}`, `{"type":"string","maxLength":1000}`},
	"number":      {`{"type":["number","null"]}`, `{"type":"number"}`},
	"money":       {`{"type":["number","null"],"minimum":0}`, `{"type":"number","minimum":0}`},
	"date":        {`{"type":["string","null"],"format":"date"}`, `{"type":"string","format":"date"}`},
	"datetime":    {`{"type":["string","null"],"format":"date-time"}`, `{"type":"string","format":"date-time"}`},
	"boolean":     {`{"type":["boolean","null"]}`, `{"type":"boolean"}`},
	"url":         {`{"type":["string","null"],"format":"uri"}`, `{"type":"string","format":"uri"}`},
	"email":       {`{"type":["string","null"],"format":"email"}`, `{"type":"string","format":"email"}`},
	"user":        {`{"type":["integer","null"],"format":"int64","minimum":1}`, `{"type":"integer","format":"int64","minimum":1}`},
	"select":      {`{"type":["string","null"],"enum":[OPTIONS,null]}`, `{"type":"string","enum":[OPTIONS]}`},
	"multiSelect": {`{"type":["array","null"],"items":{"type":"string","enum":[OPTIONS]},"maxItems":` + strconv.Itoa(maxMultiSelected) + `}`, `{"type":"string","enum":[OPTIONS]}`},
}

// schemaOf returns template, one of customValueSchemas, for f: its options in place of OPTIONS.
func (f *customField) schemaOf(template string) []byte {
	options := appendStrings(nil, f.optionValues()) // a select has one at least
	return []byte(strings.Replace(template, "OPTIONS", string(options[1:len(options)-1]), 1))
}

// customObjectSchemas returns the schemas of custom of a kind of object whose fields are fields: in an
// object (every field present), and in a body (a merge patch: any of them).
func customObjectSchemas(fields []customField) (custom, patch []byte) {
	props := make([]member, 0, len(fields))
	keys := make([]string, 0, len(fields))
	for _, f := range fields {
		s := f.schemaOf(customValueSchemas[f.Type].value)
		titled := append(append(appendString([]byte(`{"title":`), f.Label), ','), s[1:]...)
		props = append(props, member{f.Key, titled})
		keys = append(keys, f.Key)
	}
	patch = appendMembers(nil, []member{{"type", []byte(`"object"`)}, {"additionalProperties", []byte("false")},
		{"properties", appendMembers(nil, props)}})
	if len(keys) == 0 {
		return patch, patch
	}
	custom = append(appendStrings(append(patch[:len(patch)-1:len(patch)-1], `,"required":`...), keys), '}')
	return custom, patch
}

// customNulls returns custom of an object without values whose fields are fields: each of them null.
func customNulls(fields []customField) []byte {
	nulls := make([]member, 0, len(fields))
	for _, f := range fields {
		nulls = append(nulls, member{f.Key, []byte("null")})
	}
	return appendMembers(nil, nulls)
}

// addListParams adds the custom filters of fields to the list, the count and the summary of table's
// objects in paths, and their sorts to the list's parameter sortParam in params (organizations have
// no count, and no sort).
func addListParams(paths, params []member, table, sortParam string, fields []customField) {
	var sorts, filters []json.RawMessage
	for _, f := range fields {
		if f.Type != "multiSelect" {
			sorts = append(sorts, appendString(nil, "custom."+f.Key), appendString(nil, "-custom."+f.Key))
		}
		filters = append(filters, f.filterParams()...)
	}
	add := func(elems []json.RawMessage) func(json.RawMessage) json.RawMessage {
		return func(arr json.RawMessage) json.RawMessage { return addToArray(arr, elems) }
	}
	for i, p := range paths {
		if p.name == "/v1/"+table || p.name == "/v1/"+table+"/count" || p.name == "/v1/"+table+"/summary" {
			paths[i].raw = editMember(p.raw, []string{"get", "parameters"}, add(filters))
		}
	}
	for i, p := range params {
		if p.name == sortParam {
			params[i].raw = editMember(p.raw, []string{"schema", "enum"}, add(sorts))
		}
	}
}

// filterParams returns the query parameters of f's filters, as a list's parameters in an OpenAPI
// document: custom.<key>, and the ranges of an ordered type.
func (f *customField) filterParams() []json.RawMessage {
	ranged := slices.Contains([]string{"number", "money", "date", "datetime"}, f.Type)
	schema := f.schemaOf(customValueSchemas[f.Type].filter)
	var params []json.RawMessage
	for _, op := range slices.Sorted(maps.Keys(customOps)) {
		if op != "" && !ranged {
			continue
		}
		name := "custom." + f.Key
		verb := customOps[op]
		if op != "" {
			name += "[" + op + "]"
		} else if f.Type == "multiSelect" {
			verb = "holds"
		}
		description := "Only objects whose custom." + f.Key + " " + verb + " this value."
		params = append(params, appendMembers(nil, []member{{"name", appendString(nil, name)}, {"in", []byte(`"query"`)},
			{"description", appendString(nil, description)}, {"schema", schema}}))
	}
	return params
}
