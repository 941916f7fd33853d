package moonhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
)

func errFmt(err error) error { return fmt.Errorf("get: %w", err) }

// recorder is an httptest.ResponseRecorder that also says whether anything
// at all was written, and carries a request to answer.
type recorder struct {
	*httptest.ResponseRecorder
	req   *http.Request
	wrote bool
}

func newRecorder() *recorder {
	return &recorder{ResponseRecorder: httptest.NewRecorder(), req: httptest.NewRequest("GET", "/", nil)}
}

func (r *recorder) WriteHeader(code int) {
	r.wrote = true
	r.ResponseRecorder.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseRecorder.Write(b)
}
