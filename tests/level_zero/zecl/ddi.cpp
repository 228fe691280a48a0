// zecl: the DDI table getters the Level Zero loader resolves by name.
//
// The 1.8 loader's zeInit fails unless the driver exports 46 getters: every core table, all zes
// tables and the zet tables (found by experiment, ../shared/level-zero/exp/). Tables this
// driver does not implement are returned empty (all NULL), which the loader accepts. The loader
// asks for API 1.4; any 1.x is accepted.
#include <level_zero/zes_ddi.h>
#include <level_zero/zet_ddi.h>

#include "zecl.hpp"

#define ZECL_EXPORT extern "C" __attribute__((visibility("default")))
#define ZECL_CHECK()                                                   \
  if (!t) return ZE_RESULT_ERROR_INVALID_NULL_POINTER;                  \
  if (ZE_MAJOR_VERSION(v) != 1) return ZE_RESULT_ERROR_UNSUPPORTED_VERSION

#define ZECL_TABLE(getter, T, fill)                      \
  ZECL_EXPORT ze_result_t getter(ze_api_version_t v, T* t) { \
    ZECL_CHECK();                                        \
    zecl::fill(t);                                       \
    return ZE_RESULT_SUCCESS;                            \
  }
#define ZECL_EMPTY(getter, T)                            \
  ZECL_EXPORT ze_result_t getter(ze_api_version_t v, T* t) { \
    ZECL_CHECK();                                        \
    return ZE_RESULT_SUCCESS;                            \
  }

ZECL_TABLE(zeGetGlobalProcAddrTable, ze_global_dditable_t, fill_global)
ZECL_TABLE(zeGetDriverProcAddrTable, ze_driver_dditable_t, fill_driver)
ZECL_TABLE(zeGetDeviceProcAddrTable, ze_device_dditable_t, fill_device)
ZECL_TABLE(zeGetContextProcAddrTable, ze_context_dditable_t, fill_context)
ZECL_TABLE(zeGetMemProcAddrTable, ze_mem_dditable_t, fill_mem)
ZECL_TABLE(zeGetModuleProcAddrTable, ze_module_dditable_t, fill_module)
ZECL_TABLE(zeGetModuleBuildLogProcAddrTable, ze_module_build_log_dditable_t, fill_build_log)
ZECL_TABLE(zeGetKernelProcAddrTable, ze_kernel_dditable_t, fill_kernel)
ZECL_TABLE(zeGetEventPoolProcAddrTable, ze_event_pool_dditable_t, fill_event_pool)
ZECL_TABLE(zeGetEventProcAddrTable, ze_event_dditable_t, fill_event)
ZECL_TABLE(zeGetFenceProcAddrTable, ze_fence_dditable_t, fill_fence)
ZECL_TABLE(zeGetCommandQueueProcAddrTable, ze_command_queue_dditable_t, fill_queue)
ZECL_TABLE(zeGetCommandListProcAddrTable, ze_command_list_dditable_t, fill_list)

ZECL_EMPTY(zeGetDeviceExpProcAddrTable, ze_device_exp_dditable_t)
ZECL_EMPTY(zeGetEventExpProcAddrTable, ze_event_exp_dditable_t)
ZECL_EMPTY(zeGetImageProcAddrTable, ze_image_dditable_t)
ZECL_EMPTY(zeGetImageExpProcAddrTable, ze_image_exp_dditable_t)
ZECL_EMPTY(zeGetKernelExpProcAddrTable, ze_kernel_exp_dditable_t)
ZECL_EMPTY(zeGetPhysicalMemProcAddrTable, ze_physical_mem_dditable_t)
ZECL_EMPTY(zeGetSamplerProcAddrTable, ze_sampler_dditable_t)
ZECL_EMPTY(zeGetVirtualMemProcAddrTable, ze_virtual_mem_dditable_t)
ZECL_EMPTY(zeGetFabricEdgeExpProcAddrTable, ze_fabric_edge_exp_dditable_t)
ZECL_EMPTY(zeGetFabricVertexExpProcAddrTable, ze_fabric_vertex_exp_dditable_t)
ZECL_EMPTY(zetGetDeviceProcAddrTable, zet_device_dditable_t)
ZECL_EMPTY(zetGetContextProcAddrTable, zet_context_dditable_t)
ZECL_EMPTY(zetGetCommandListProcAddrTable, zet_command_list_dditable_t)
ZECL_EMPTY(zetGetKernelProcAddrTable, zet_kernel_dditable_t)
ZECL_EMPTY(zetGetModuleProcAddrTable, zet_module_dditable_t)
ZECL_EMPTY(zetGetDebugProcAddrTable, zet_debug_dditable_t)
ZECL_EMPTY(zetGetMetricProcAddrTable, zet_metric_dditable_t)
ZECL_EMPTY(zetGetMetricGroupProcAddrTable, zet_metric_group_dditable_t)
ZECL_EMPTY(zetGetMetricGroupExpProcAddrTable, zet_metric_group_exp_dditable_t)
ZECL_EMPTY(zetGetMetricQueryProcAddrTable, zet_metric_query_dditable_t)
ZECL_EMPTY(zetGetMetricQueryPoolProcAddrTable, zet_metric_query_pool_dditable_t)
ZECL_EMPTY(zetGetMetricStreamerProcAddrTable, zet_metric_streamer_dditable_t)
ZECL_EMPTY(zetGetTracerExpProcAddrTable, zet_tracer_exp_dditable_t)
ZECL_EMPTY(zesGetDeviceProcAddrTable, zes_device_dditable_t)
ZECL_EMPTY(zesGetDriverProcAddrTable, zes_driver_dditable_t)
ZECL_EMPTY(zesGetDiagnosticsProcAddrTable, zes_diagnostics_dditable_t)
ZECL_EMPTY(zesGetEngineProcAddrTable, zes_engine_dditable_t)
ZECL_EMPTY(zesGetFabricPortProcAddrTable, zes_fabric_port_dditable_t)
ZECL_EMPTY(zesGetFanProcAddrTable, zes_fan_dditable_t)
ZECL_EMPTY(zesGetFirmwareProcAddrTable, zes_firmware_dditable_t)
ZECL_EMPTY(zesGetFrequencyProcAddrTable, zes_frequency_dditable_t)
ZECL_EMPTY(zesGetLedProcAddrTable, zes_led_dditable_t)
ZECL_EMPTY(zesGetMemoryProcAddrTable, zes_memory_dditable_t)
ZECL_EMPTY(zesGetPerformanceFactorProcAddrTable, zes_performance_factor_dditable_t)
ZECL_EMPTY(zesGetPowerProcAddrTable, zes_power_dditable_t)
ZECL_EMPTY(zesGetPsuProcAddrTable, zes_psu_dditable_t)
ZECL_EMPTY(zesGetRasProcAddrTable, zes_ras_dditable_t)
ZECL_EMPTY(zesGetSchedulerProcAddrTable, zes_scheduler_dditable_t)
ZECL_EMPTY(zesGetStandbyProcAddrTable, zes_standby_dditable_t)
ZECL_EMPTY(zesGetTemperatureProcAddrTable, zes_temperature_dditable_t)
