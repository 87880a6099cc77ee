package mcpaccess_test

import (
	"testing"

	"github.com/marketplane/marketplane/internal/operator/internal/optest"
)

func TestMain(m *testing.M) { optest.Main(m) }
