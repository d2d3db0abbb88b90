package compat_test

import (
	"os"
	"testing"

	"github.com/outflowhq/outflow/internal/awstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }
