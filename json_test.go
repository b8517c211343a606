package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// Tests of the hand-written JSON encoders in json.go.

// appendStringSeeds are strings where a hand-written encoder goes wrong: every escape, every control
// byte, HTML characters, the JavaScript line separators and invalid UTF-8.
func appendStringSeeds() []string {
	seeds := []string{
		"", "plain", `"`, `\`, `"quoted"`, `back\slash`, `\"`, `"\`, "<>&", "<script>&amp;</script>",
		"\u2028\u2029", "a\u2028b\u2029c", "\u2027\u202a", "\x7f", "é", "日本語", "🚀", "a🚀b", "\U0010ffff",
		"\ufffd", "\xef\xbf\xbd", "\xff", "\xc3", "a\xc3", "\xc3(", "a\xed\xa0\x80b", "\xed\xbf\xbf",
		"\xf4\x90\x80\x80", "\xf0\x9f\x9a", "\xe2\x80", "\xe2\x80\xa8", "\xc0\x80", "\xfe\xff",
		"tab\there", "line\nbreak", "cr\rlf\n", "\b\f\n\r\t", "ends with escape\n", "\x00", "a\x00b",
	}
	for b := 0; b < 0x20; b++ {
		seeds = append(seeds, string(rune(b)), "x"+string(rune(b))+"y")
	}
	return seeds
}

func FuzzAppendString(f *testing.F) {
	for _, s := range appendStringSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendString(%q) = %s; want json.Marshal's %s", s, got, want)
		}
		// Appending keeps what dst held.
		if got := appendString([]byte(`{"k":`), s); !bytes.Equal(got, append([]byte(`{"k":`), want...)) {
			t.Errorf("appendString(`{\"k\":`, %q) = %s; want the prefix and %s", s, got, want)
		}
	})
}

func TestAppendStringSeedsMatchJSONMarshal(t *testing.T) {
	t.Parallel()
	// The fuzz seeds run under plain go test too; this names the cases that matter most.
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"<>&", `"\u003c\u003e\u0026"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"\x7f", "\"\x7f\""},
		{"\xff", `"\ufffd"`},
		{"a\xed\xa0\x80b", `"a\ufffd\ufffd\ufffdb"`},
		{"🚀é", `"🚀é"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s; want %s", tt.in, got, tt.want)
		}
	}
}

// Not parallel: AllocsPerRun counts every allocation of the process, and refuses to run in a
// parallel test.
func TestAppendStringDoesNotAllocate(t *testing.T) {
	tests := []struct {
		name, s string
	}{
		{"plain ASCII", "Ana María Pérez, CEO"},
		{"multi-byte UTF-8", "日本語 🚀 ñandú"},
		{"escapes", "a\"b\\c\n<&>\x01\u2028\xff"},
		{"a long plain string", strings.Repeat("abcdefgh", 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, 0, 8*len(tt.s)+2) // room for the worst case, \ufffd per byte
			allocs := testing.AllocsPerRun(100, func() {
				dst = appendString(dst[:0], tt.s)
			})
			if allocs != 0 {
				t.Errorf("appendString(%q) with room in dst: %v allocations per run; want 0", tt.s, allocs)
			}
		})
	}
}

func TestAppendTimeIsUTCWithThreeFractionalDigits(t *testing.T) {
	t.Parallel()
	plus2 := time.FixedZone("+02:00", 2*60*60)
	minus5 := time.FixedZone("-05:30", -(5*60*60 + 30*60))
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{"whole seconds in +02:00", time.Date(2026, 11, 21, 11, 30, 0, 0, plus2), `"2026-11-21T09:30:00.000Z"`},
		{"milliseconds in UTC", time.Date(2026, 11, 21, 9, 30, 0, 123_000_000, time.UTC), `"2026-11-21T09:30:00.123Z"`},
		{"nanoseconds are cut, not rounded", time.Date(2026, 11, 21, 9, 30, 0, 999_999_999, time.UTC), `"2026-11-21T09:30:00.999Z"`},
		{"one nanosecond", time.Date(2026, 11, 21, 9, 30, 0, 1, time.UTC), `"2026-11-21T09:30:00.000Z"`},
		{"ten milliseconds keep their zeros", time.Date(2026, 1, 2, 3, 4, 5, 10_000_000, time.UTC), `"2026-01-02T03:04:05.010Z"`},
		{"a negative offset crosses midnight", time.Date(2026, 12, 31, 20, 0, 0, 5_000_000, minus5), `"2027-01-01T01:30:00.005Z"`},
		{"the zero time", time.Time{}, `"0001-01-01T00:00:00.000Z"`},
		{"a local time", time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local), `"` + time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local).UTC().Format("2006-01-02T15:04:05") + `.000Z"`},
	}
	for _, tt := range tests {
		if got := string(appendTime(nil, tt.in)); got != tt.want {
			t.Errorf("%s: appendTime(%v) = %s; want %s", tt.name, tt.in, got, tt.want)
		}
	}
	// A time with a monotonic reading prints the same.
	now := time.Now()
	if a, b := appendTime(nil, now), appendTime(nil, now.Round(0)); !bytes.Equal(a, b) {
		t.Errorf("appendTime with and without monotonic clock: %s, %s", a, b)
	}
	if !apiTimeRE.MatchString(strings.Trim(string(appendTime(nil, now)), `"`)) {
		t.Errorf("appendTime(now) = %s; want the API's format", appendTime(nil, now))
	}
}

func TestAppendNullables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"a null string", appendNullString(nil, sql.NullString{}), `null`},
		{"a null string that holds text", appendNullString(nil, sql.NullString{String: "x"}), `null`},
		{"an empty string", appendNullString(nil, sql.NullString{Valid: true}), `""`},
		{"a string to escape", appendNullString(nil, sql.NullString{String: "a\"<", Valid: true}), `"a\"\u003c"`},
		{"a null int", appendNullInt(nil, sql.NullInt64{}), `null`},
		{"a null int that holds a number", appendNullInt(nil, sql.NullInt64{Int64: 7}), `null`},
		{"zero", appendNullInt(nil, sql.NullInt64{Valid: true}), `0`},
		{"the smallest int64", appendNullInt(nil, sql.NullInt64{Int64: math.MinInt64, Valid: true}), `-9223372036854775808`},
		{"the largest int64", appendNullInt(nil, sql.NullInt64{Int64: math.MaxInt64, Valid: true}), `9223372036854775807`},
		{"a null time", appendNullTime(nil, sql.NullTime{}), `null`},
		{"a time", appendNullTime(nil, sql.NullTime{Time: time.Date(2026, 11, 21, 9, 30, 0, 123_456_789, time.UTC), Valid: true}), `"2026-11-21T09:30:00.123Z"`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s: got %s; want %s", tt.name, tt.got, tt.want)
		}
	}
}

// trickyStrings holds valid UTF-8 that needs escaping; invalid UTF-8 is FuzzAppendString's job,
// because it does not survive a round trip (json.Marshal turns it into U+FFFD).
var trickyStrings = []string{
	`Ana "la <jefa>" & co`, `back\slash\`, "line\nbreak\r\n\ttab", "\x00\x01\x1f\x7f", "\u2028\u2029",
	"🚀 ñandú 日本語", "\ufffd", "</script>", "'single'", "",
}

func TestAppendContactRoundTripsThroughEncodingJSON(t *testing.T) {
	t.Parallel()
	plus2 := time.FixedZone("+02:00", 2*60*60)
	ns := func(i int) sql.NullString {
		return sql.NullString{String: trickyStrings[i%len(trickyStrings)], Valid: true}
	}
	ni := func(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }
	sp := func(i int) *string { s := trickyStrings[i%len(trickyStrings)]; return &s }
	tests := []struct {
		name string
		in   contact
		want wireContact
	}{
		{
			name: "every field set with tricky strings",
			in: contact{
				ID: math.MaxInt64, Name: trickyStrings[0],
				Surname: ns(1), DNI: ns(2), JobTitle: ns(3), Email: ns(4), SecondaryEmail: ns(5), Phone: ns(6),
				MobilePhone: ns(7), URLAvatar: ns(8), Address: ns(9), City: ns(10),
				WithSales: true, CountryID: ni(724), Classification: ni(math.MinInt32), StageID: ni(math.MaxInt64),
				OrganizationID: ni(1), AssignedToID: ni(1<<53 + 1), UserCreatorID: math.MaxInt64 - 1,
				CreatedAt: time.Date(2026, 11, 21, 11, 30, 0, 0, plus2),
				UpdatedAt: time.Date(2026, 11, 21, 9, 30, 0, 123_999_999, time.UTC),
				Version:   42,
			},
			want: wireContact{
				ID: "9223372036854775807", Name: trickyStrings[0],
				Surname: sp(1), DNI: sp(2), JobTitle: sp(3), Email: sp(4), SecondaryEmail: sp(5), Phone: sp(6),
				MobilePhone: sp(7), URLAvatar: sp(8), Address: sp(9), City: sp(10),
				WithSales: true, CountryID: ptrTo[int64](724), Classification: ptrTo[int64](math.MinInt32),
				StageID: ptrTo[int64](math.MaxInt64), OrganizationID: ptrTo[int64](1), AssignedToID: ptrTo[int64](1<<53 + 1),
				UserCreatorID: math.MaxInt64 - 1,
				CreatedAt:     "2026-11-21T09:30:00.000Z",
				UpdatedAt:     "2026-11-21T09:30:00.123Z",
			},
		},
		{
			name: "every optional field null",
			in: contact{ID: 1, Name: "Ana", UserCreatorID: 2,
				CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
				UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)},
			want: wireContact{ID: "1", Name: "Ana", UserCreatorID: 2,
				CreatedAt: "2026-01-02T03:04:05.006Z", UpdatedAt: "2026-01-02T03:04:05.006Z"},
		},
		{
			name: "empty strings are strings, not null",
			in: contact{ID: 10, Name: "", Surname: sql.NullString{Valid: true}, City: sql.NullString{Valid: true},
				Classification: ni(0), CountryID: ni(0)},
			want: wireContact{ID: "10", Name: "", Surname: ptrTo(""), City: ptrTo(""),
				Classification: ptrTo[int64](0), CountryID: ptrTo[int64](0),
				CreatedAt: "0001-01-01T00:00:00.000Z", UpdatedAt: "0001-01-01T00:00:00.000Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := appendContact(nil, &tt.in)
			if !json.Valid(b) {
				t.Fatalf("appendContact wrote invalid JSON: %s", b)
			}
			got := decodeContact(t, b)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("appendContact, decoded (-want +got):\n%s\nJSON %s", diff, b)
			}
			// The id is a JSON string and the references JSON numbers, even past 2^53.
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			if want := strconv.Quote(strconv.FormatInt(tt.in.ID, 10)); string(raw["id"]) != want {
				t.Errorf("id = %s; want %s", raw["id"], want)
			}
			if want := strconv.FormatInt(tt.in.UserCreatorID, 10); string(raw["userCreatorId"]) != want {
				t.Errorf("userCreatorId = %s; want %s", raw["userCreatorId"], want)
			}
		})
	}
}

func TestAppendContactAppendsToDst(t *testing.T) {
	t.Parallel()
	c := benchContact()
	alone := appendContact(nil, &c)
	got := appendContact([]byte(`{"data":[`), &c)
	if want := append([]byte(`{"data":[`), alone...); !bytes.Equal(got, want) {
		t.Errorf("appendContact onto a prefix = %s; want %s", got, want)
	}
	if !utf8.Valid(alone) {
		t.Errorf("appendContact wrote invalid UTF-8: %q", alone)
	}
}

// Not parallel, like TestAppendStringDoesNotAllocate.
func TestAppendContactDoesNotAllocate(t *testing.T) {
	c := benchContact()
	dst := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(100, func() { dst = appendContact(dst[:0], &c) }); allocs != 0 {
		t.Errorf("appendContact with room in dst: %v allocations per run; want 0", allocs)
	}
}

// benchContact is a contact with every field set, as a list page holds them.
func benchContact() contact {
	s := func(v string) sql.NullString { return sql.NullString{String: v, Valid: true} }
	n := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	at := time.Date(2026, 11, 21, 9, 30, 0, 123_000_000, time.UTC)
	return contact{
		ID: 1042, Name: "Ana María", Surname: s("Pérez García"), DNI: s("12345678Z"), JobTitle: s("Head of Sales"),
		Email: s("ana.perez@example.com"), SecondaryEmail: s("ana@example.org"), Phone: s("+34 910 000 000"),
		MobilePhone: s("+34 600 000 000"), URLAvatar: s("https://cdn.example.com/avatars/1042.png"),
		Address: s("Calle Mayor 1, 3º B"), City: s("Madrid"), WithSales: true, CountryID: n(724),
		Classification: n(3), StageID: n(12), OrganizationID: n(345), AssignedToID: n(6), UserCreatorID: 6,
		CreatedAt: at, UpdatedAt: at.Add(time.Hour), Version: 3,
	}
}

func BenchmarkAppendContact(b *testing.B) {
	c := benchContact()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendContact(buf[:0], &c)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendContactPage(b *testing.B) {
	page := make([]contact, 100)
	for i := range page {
		page[i] = benchContact()
		page[i].ID = int64(1000 + i)
	}
	buf := make([]byte, 0, 64*1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = append(buf[:0], `{"data":[`...)
		for i := range page {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendContact(buf, &page[i])
		}
		buf = append(buf, "]}"...)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkMarshalContactBaseline is the yardstick for BenchmarkAppendContact: the same contact
// through encoding/json's reflection, as a straightforward server would write it.
func BenchmarkMarshalContactBaseline(b *testing.B) {
	c := benchContact()
	str := func(s sql.NullString) *string { return &s.String }
	num := func(n sql.NullInt64) *int64 { return &n.Int64 }
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		w := wireContact{strconv.FormatInt(c.ID, 10), c.Name, str(c.Surname), str(c.DNI), str(c.JobTitle), str(c.Email),
			str(c.SecondaryEmail), str(c.Phone), str(c.MobilePhone), str(c.URLAvatar), str(c.Address), str(c.City),
			c.WithSales, num(c.CountryID), num(c.Classification), num(c.StageID), num(c.OrganizationID),
			num(c.AssignedToID), c.UserCreatorID, c.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
			c.UpdatedAt.UTC().Format("2006-01-02T15:04:05.000Z")}
		out, _ = json.Marshal(w)
	}
	b.SetBytes(int64(len(out)))
}
