// The chat page served at GET / (server/chat_page.html, compiled into the binary).
#pragma once

namespace kiln::server {

const char* chat_page_html();

}  // namespace kiln::server
