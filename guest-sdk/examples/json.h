/* The examples' JSON helper is the SDK's: include/berm_json.h. */
#include <berm_json.h>
