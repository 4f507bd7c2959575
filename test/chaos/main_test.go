package chaos

import "testing"

var run *Run

func TestMain(m *testing.M) { Main(m, &run) }
