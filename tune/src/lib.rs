//! Searches implementation parameters with the generated driver as the objective.
