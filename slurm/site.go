package slurm

import (
	"bytes"
	"context"
	"fmt"
)

// Reservations runs ReservationQueryArgs and parses it. Records that cannot
// be parsed are logged and left out.
func (c *Client) Reservations(ctx context.Context) ([]Reservation, error) {
	out, err := c.run(ctx, ReservationQueryArgs)
	if err != nil {
		return nil, fmt.Errorf("listing reservations: %w", err)
	}
	res, errs := ParseReservations(bytes.NewReader(out))
	c.logParseErrors("scontrol show reservation", errs)
	return res, nil
}

// Limits reads the accounting limits: the associations (AssocQueryArgs)
// and the QOS (QOSQueryArgs). On a cluster without slurmdbd sacctmgr
// fails, and so does Limits.
func (c *Client) Limits(ctx context.Context) (Limits, error) {
	out, err := c.run(ctx, AssocQueryArgs)
	if err != nil {
		return Limits{}, fmt.Errorf("reading associations: %w", err)
	}
	assocs, errs := ParseAssociations(bytes.NewReader(out))
	c.logParseErrors("sacctmgr show assoc", errs)
	out, err = c.run(ctx, QOSQueryArgs)
	if err != nil {
		return Limits{}, fmt.Errorf("reading QOS: %w", err)
	}
	qos, errs := ParseQOS(bytes.NewReader(out))
	c.logParseErrors("sacctmgr show qos", errs)
	return Limits{Associations: assocs, QOS: qos}, nil
}
