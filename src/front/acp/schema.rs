//! The ACP wire types keel uses, from `agent-client-protocol-schema` (pinned with `=` in
//! Cargo.toml): the one place the crate is named, so a new version is adopted here. Pure
//! re-exports; no logic.

pub use agent_client_protocol_schema::v1::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    CancelNotification, CloseSessionRequest, ConfigOptionUpdate, ContentBlock, ContentChunk, Cost,
    CurrentModeUpdate, Diff, EmbeddedResourceResource, FileSystemCapabilities, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, McpCapabilities, McpServer, MessageId, NewSessionRequest, Notice,
    NoticeSeverity, PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, PromptCapabilities, PromptRequest, PromptResponse, ReadTextFileRequest,
    ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ResumeSessionRequest, SessionCapabilities, SessionCloseCapabilities,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionInfo, SessionInfoUpdate, SessionListCapabilities,
    SessionMode, SessionModeState, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind, UnstructuredCommandInput, UsageUpdate, WriteTextFileRequest,
};
pub use agent_client_protocol_schema::ProtocolVersion;
