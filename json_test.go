package main

// Tests of the hand-written JSON encoders (json.go and each type's encoder).

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

func FuzzAppendString(f *testing.F) {
	// Where a hand-written encoder goes wrong: every escape, every control byte, HTML characters, the
	// JavaScript line separators and invalid UTF-8.
	for _, s := range []string{
		"", "plain", `"`, `\`, `"quoted"`, `back\slash`, `\"`, `"\`, "<>&", "<script>&amp;</script>",
		"\u2028\u2029", "a\u2028b\u2029c", "\u2027\u202a", "\x7f", "é", "日本語", "🚀", "a🚀b", "\U0010ffff",
		"\ufffd", "\xef\xbf\xbd", "\xff", "\xc3", "a\xc3", "\xc3(", "a\xed\xa0\x80b", "\xed\xbf\xbf",
		"\xf4\x90\x80\x80", "\xf0\x9f\x9a", "\xe2\x80", "\xe2\x80\xa8", "\xc0\x80", "\xfe\xff",
		"tab\there", "line\nbreak", "cr\rlf\n", "\b\f\n\r\t", "ends with escape\n", "\x00", "a\x00b",
	} {
		f.Add(s)
	}
	for b := range 0x20 {
		f.Add("x" + string(rune(b)) + "y")
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		// Appending keeps what dst held.
		if got := appendString([]byte(`{"k":`), s); !bytes.Equal(got, append([]byte(`{"k":`), want...)) {
			t.Errorf("appendString(`{\"k\":`, %q) = %s; want the prefix and json.Marshal's %s", s, got, want)
		}
	})
}

// FuzzAppendTime holds appendTime to time's own formatting of the API's layout, for the years a
// stored time can have (1 to 9999).
func FuzzAppendTime(f *testing.F) {
	for _, s := range []int64{0, -62135596800, 253402300799, 253402300800, 1795685400, -1, 951782400} {
		f.Add(s, int64(123_456_789))
	}
	// Every input is folded into those years (0001-01-01 to 9999-12-31 23:59:59 UTC), so none is wasted.
	const first, span = -62135596800, 253402300800 + 62135596800
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(first+(sec%span+span)%span, (nsec%1e9+1e9)%1e9)
		want := `"` + tm.UTC().Format("2006-01-02T15:04:05.000Z07:00") + `"`
		if got := string(appendTime(nil, tm)); got != want {
			t.Errorf("appendTime(%v) = %s; want %s", tm, got, want)
		}
	})
}

func TestAppendTimeIsUTCWithThreeFractionalDigits(t *testing.T) {
	t.Parallel()
	plus2 := time.FixedZone("+02:00", 2*60*60)
	minus5 := time.FixedZone("-05:30", -(5*60*60 + 30*60))
	local := time.Date(2026, 6, 1, 12, 0, 0, 0, time.Local)
	for _, tt := range []struct {
		name string
		in   time.Time
		want string
	}{
		{"whole seconds in +02:00", time.Date(2026, 11, 21, 11, 30, 0, 0, plus2), `"2026-11-21T09:30:00.000Z"`},
		{"milliseconds in UTC", time.Date(2026, 11, 21, 9, 30, 0, 123_000_000, time.UTC), `"2026-11-21T09:30:00.123Z"`},
		{"nanoseconds are cut, not rounded", time.Date(2026, 11, 21, 9, 30, 0, 999_999_999, time.UTC), `"2026-11-21T09:30:00.999Z"`},
		{"ten milliseconds keep their zeros", time.Date(2026, 1, 2, 3, 4, 5, 10_000_000, time.UTC), `"2026-01-02T03:04:05.010Z"`},
		{"a negative offset crosses midnight", time.Date(2026, 12, 31, 20, 0, 0, 5_000_000, minus5), `"2027-01-01T01:30:00.005Z"`},
		{"the zero time", time.Time{}, `"0001-01-01T00:00:00.000Z"`},
		{"a local time", local, `"` + local.UTC().Format("2006-01-02T15:04:05") + `.000Z"`},
	} {
		if got := string(appendTime(nil, tt.in)); got != tt.want {
			t.Errorf("%s: appendTime(%v) = %s; want %s", tt.name, tt.in, got, tt.want)
		}
	}
	now := time.Now()
	if a, b := appendTime(nil, now), appendTime(nil, now.Round(0)); !bytes.Equal(a, b) {
		t.Errorf("appendTime with and without a monotonic reading: %s, %s", a, b)
	}
}

func TestAppendObjectWritesEachKindOfValue(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 9, 30, 0, 123_456_789, time.FixedZone("+02:00", 2*60*60))
	for _, tt := range []struct {
		name  string
		value any
		want  string
	}{
		{"an int", ptrTo[int64](math.MinInt64), `-9223372036854775808`},
		{"a string to escape", ptrTo("a\"<"), `"a\"\u003c"`},
		{"a bool", ptrTo(true), `true`},
		{"a time, in UTC", &at, `"2026-11-21T07:30:00.123Z"`},
		{"an id as text", ptrTo(textID(math.MaxInt64)), `"9223372036854775807"`},
		{"a list of strings", &commaList{"a", `"b"`}, `["a","\"b\""]`},
		{"a null string", &pgtype.Text{String: "x"}, `null`},
		{"an empty string", &pgtype.Text{Valid: true}, `""`},
		{"a null int", &pgtype.Int8{Int64: 7}, `null`},
		{"a nullable int", &pgtype.Int8{Int64: math.MaxInt64, Valid: true}, `9223372036854775807`},
		{"a null time", &pgtype.Timestamptz{Time: at}, `null`},
		{"a nullable time", &pgtype.Timestamptz{Time: at, Valid: true}, `"2026-11-21T07:30:00.123Z"`},
		{"a null decimal", &decimal{String: "1"}, `null`},
		{"a decimal, as written", &decimal{String: "0.10", Valid: true}, `0.10`},
	} {
		got := string(appendObject([]byte("x"), "a", ptrTo[int64](1), "v", tt.value))
		if want := `x{"a":1,"v":` + tt.want + `}`; got != want {
			t.Errorf("%s: got %s; want %s", tt.name, got, want)
		}
	}
	if got := string(appendObject(nil)); got != `{}` {
		t.Errorf("no members: got %s; want {}", got)
	}
}

// trickyStrings are text that needs escaping, and everyField a contact with every field set to it,
// and numbers past 2^53: the benchmark's page. (That a contact's JSON holds each field as sent is
// tested through the API, in handlers_test.go, over contactValid; each kind of value above.)
var (
	trickyStrings = []string{`Ana "la <jefa>" & co`, `back\slash\`, "line\nbreak\r\n\ttab", "\x00\x01\x1f\x7f",
		"\u2028\u2029", "🚀 ñandú 日本語", "\ufffd", "</script>", "'single'", "", "plain"}
	everyField = func() contact {
		ns := func(i int) pgtype.Text { return pgtype.Text{String: trickyStrings[i], Valid: true} }
		ni := func(n int64) pgtype.Int8 { return pgtype.Int8{Int64: n, Valid: true} }
		return contact{
			ID: math.MaxInt64, Name: trickyStrings[0], Surname: ns(1), DNI: ns(2), JobTitle: ns(3), Email: ns(4),
			SecondaryEmail: ns(5), Phone: ns(6), MobilePhone: ns(7), URLAvatar: ns(8), Address: ns(9), City: ns(10),
			WithSales: true, CountryID: ni(724), Classification: ni(math.MinInt32), StageID: ni(math.MaxInt64),
			OrganizationID: ni(1), AssignedToID: ni(1<<53 + 1), UserCreatorID: math.MaxInt64 - 1,
			CreatedAt: time.Date(2026, 11, 21, 11, 30, 0, 0, time.FixedZone("+02:00", 2*60*60)),
			UpdatedAt: time.Date(2026, 11, 21, 9, 30, 0, 123_999_999, time.UTC), Version: 42,
		}
	}()
)

// BenchmarkEncodeContactPage is a list page of 100 contacts with every field set.
func BenchmarkEncodeContactPage(b *testing.B) {
	page := make([]contact, 100)
	for i := range page {
		page[i] = everyField
	}
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = append(buf[:0], `{"data":[`...)
		for i := range page {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = page[i].appendJSON(buf)
		}
		buf = append(buf, "]}"...)
	}
	b.SetBytes(int64(len(buf)))
}

// ptrTo returns a pointer to a copy of v: ptrTo("x") for a *string field.
func ptrTo[T any](v T) *T { return &v }
