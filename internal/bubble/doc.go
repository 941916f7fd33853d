// Package bubble holds tests only: they run the client's public types, and
// moonhttp's, inside testing/synctest bubbles, several bubbles in one test
// binary. Each bubble has its own fake clock, so the tests check that a
// wait takes exactly the time its rate says, while an hour of it takes no
// real time.
package bubble
