package app

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRunCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the operator's controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return errors.New("run: controllers are being wired")
		},
	}
}
