//! The ACP wire types keel uses, from `agent-client-protocol-schema` (pinned with `=` in
//! Cargo.toml): the one place the crate is named, so a new version is adopted here. Pure
//! re-exports; no logic.

pub use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, UnstructuredCommandInput,
    AgentCapabilities, CancelNotification, CloseSessionRequest, ContentBlock, ContentChunk, Diff,
    EmbeddedResourceResource, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, MessageId, NewSessionRequest,
    PermissionOption, PermissionOptionKind, PromptCapabilities, PromptRequest, PromptResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    ResumeSessionRequest, SessionCapabilities, SessionCloseCapabilities, SessionInfo,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    StopReason, TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, ConfigOptionUpdate, CurrentModeUpdate,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionMode, SessionModeState, SetSessionConfigOptionRequest,
    SetSessionModeRequest,
};
pub use agent_client_protocol_schema::ProtocolVersion;
