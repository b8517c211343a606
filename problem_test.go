package main

// Tests of problem.go's mapping of errors to answers, and of store.go's mapping of PostgreSQL's
// refusals to those errors. The answers themselves are tested through HTTP in the other files.

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestEveryStoreErrorHasItsStatusAndCode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("read contact 7: %w", errNotFound), http.StatusNotFound, "not_found"},
		{errPreconditionFailed, http.StatusPreconditionFailed, "precondition_failed"},
		{errKeyInUse, http.StatusConflict, "idempotency_key_in_use"},
		{errKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused"},
		{errWebhookLimit, http.StatusUnprocessableEntity, "webhook_limit_reached"},
		{fmt.Errorf("%w: %w", errOutOfRange, errors.New("22003")), http.StatusUnprocessableEntity, "validation_failed"},
		{fieldErrors{{Field: "email", Message: "must be an e-mail address"}}, http.StatusUnprocessableEntity, "validation_failed"},
		{badRequest("invalid_id", "The id in the path must be a positive integer."), http.StatusBadRequest, "invalid_id"},
	} {
		ae := clientError(tt.err)
		if ae == nil || ae.Status != tt.status || ae.Code != tt.code || ae.Detail == "" {
			t.Errorf("clientError(%v) = %+v; want status %d, code %s and a detail", tt.err, ae, tt.status, tt.code)
		}
	}
	if ae := clientError(errors.New("a bug")); ae != nil {
		t.Errorf("clientError of any other error = %+v; want nil (a 500)", ae)
	}
	if got := badRequest("invalid_json", "The body must be one JSON object.").Error(); got != "invalid_json: The body must be one JSON object." {
		t.Errorf("apiError.Error() = %q", got)
	}
}

func TestMapWriteErrorNamesTheFieldOrTheRange(t *testing.T) {
	t.Parallel()
	fkey := &pgconn.PgError{Code: "23503", ConstraintName: "contacts_company_id_organization_id_fkey"}
	var fe fieldErrors
	if err := mapWriteError(fkey); !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "organizationId" {
		t.Errorf("a foreign key refused: %v; want a field error on organizationId", err)
	}
	for _, code := range []string{"22001", "22003", "22007", "22008", "22P02"} {
		if err := mapWriteError(&pgconn.PgError{Code: code}); !errors.Is(err, errOutOfRange) {
			t.Errorf("SQLSTATE %s: %v; want errOutOfRange", code, err)
		}
	}
	for _, err := range []error{&pgconn.PgError{Code: "40001"}, errors.New("connection reset")} {
		if got := mapWriteError(err); got != err {
			t.Errorf("mapWriteError(%v) = %v; want it unchanged", err, got)
		}
	}
}
