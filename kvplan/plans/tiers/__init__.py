"""KV placement across memory tiers: tier plan, reuse, fleet, inputs, the PD feedback."""
