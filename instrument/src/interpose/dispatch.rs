//! What a deployed routine does with each call (`tdg autotune`): the data
//! the dispatcher's C is rendered from.

/// What the deployed routine does with each call (`tdg autotune`): calls
/// in a tuned context run the candidate compiled at that context's
/// configuration, every other call the original definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    /// One per chosen configuration, in the order routes name them.
    pub variants: Vec<DispatchVariant>,
    pub routes: Vec<DispatchRoute>,
}

/// The candidate compiled at one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchVariant {
    /// Its definition's symbol in the deployed library ([`variant_symbol`]).
    pub symbol: String,
    /// The configuration, for the comment beside it.
    pub label: String,
}

/// One tuned context and the variant its calls run.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchRoute {
    /// The context's recorded values by parameter name, as the profile's
    /// contexts hold them (a double as its bit pattern).
    pub values: std::collections::BTreeMap<String, i64>,
    pub variant: usize,
    pub label: String,
}
